"""The shapes models must answer in, when an answer is structured: a critique, a plan of questions, a
plan of steps and a decision about it (``plan_execute``).

These are not protocol messages (they never cross an actor boundary as frames):
they are what a critic or verifier *model* is asked to reply, as JSON. Their JSON
Schemas are generated from the Structs, with every ``$ref`` inlined, and sent with
the request so the backend can enforce them (a llama.cpp grammar, a JSON-schema
response format, a forced tool call). A reply is then validated against the same
Struct: a schema and its validator cannot drift apart.

The bounds (`MAX_ISSUES`, `MAX_QUESTIONS`, the text lengths) keep a
grammar-constrained reply short enough to finish inside its token limit.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec

from redraft.protocols.bounds import bounded
from redraft.protocols.messages import Issue

MAX_ISSUES = 2
"""Issues in one critique at most."""
MAX_QUESTIONS = 5
"""Chain-of-verification questions in one plan at most."""
MAX_QUESTION_TEXT = 200
"""Characters of one question at most."""


class CritiqueReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a critic model must answer: a list of issues (empty if none found)."""

    issues: Annotated[list[Issue], msgspec.Meta(max_length=MAX_ISSUES)]


class QuestionPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What a verifier model must answer when asked for chain-of-verification questions."""

    questions: Annotated[
        list[Annotated[str, msgspec.Meta(max_length=MAX_QUESTION_TEXT)]], msgspec.Meta(max_length=MAX_QUESTIONS)
    ]


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")
# Raw control characters are invalid in JSON strings, and small models emit them;
# outside strings they are whitespace, so a space is a safe stand-in everywhere.
_CONTROL = {code: " " for code in range(0x20)}
_report_decoder = msgspec.json.Decoder(CritiqueReport)
_plan_decoder = msgspec.json.Decoder(QuestionPlan)


def parse_report(text: str) -> CritiqueReport:
    """Validate a model's reply as a `CritiqueReport`; `msgspec.ValidationError`/`DecodeError` if not (a reply
    too large or too deep is a `DecodeError` too, `redraft.protocols.bounds`)."""
    return bounded(_report_decoder.decode, _FENCE.sub("", text.strip()).translate(_CONTROL), what="a critique")


def parse_plan(text: str) -> QuestionPlan:
    """Validate a model's reply as a `QuestionPlan`; `msgspec.ValidationError`/`DecodeError` if not."""
    return bounded(_plan_decoder.decode, text.strip(), what="a question plan")


Name = Annotated[str, msgspec.Meta(max_length=60)]


class StepAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """One step of a plan as a model must write it (the strategy reads replies more leniently than this)."""

    intent: Annotated[str, msgspec.Meta(max_length=200)]
    inputs: Annotated[list[Name], msgspec.Meta(max_length=6)]
    output: Name
    columns: Annotated[list[Name], msgspec.Meta(max_length=12)]
    types: dict[str, Literal["int", "float", "date", "text"]]
    min_rows: int = 0
    max_rows: int | None = None


class PlanAnswer(msgspec.Struct, frozen=True, kw_only=True):
    steps: Annotated[list[StepAnswer], msgspec.Meta(min_length=1, max_length=6)]


class DecisionAnswer(msgspec.Struct, frozen=True, kw_only=True):
    action: Literal["continue", "retry", "revise", "finish"]
    reason: Annotated[str, msgspec.Meta(max_length=200)]
    redo: int | None = None
    steps: Annotated[list[StepAnswer], msgspec.Meta(max_length=6)] = []


class EditAnswer(msgspec.Struct, kw_only=True):
    """A proposer's reply (``redraft tune``): why, then the section's whole new text.

    The text has no length in the schema: llama.cpp's grammar of a string of up to thousands of characters is
    too large for it to parse. Its reply's max tokens bound it, and the edit's check refuses one too long."""

    reason: Annotated[str, msgspec.Meta(max_length=300)]
    text: str


def edit_json_schema() -> dict[str, Any]:
    """The JSON Schema of a proposer's reply, titled ``edit``."""
    return _inlined_schema(EditAnswer) | {"title": "edit"}


def plan_json_schema(kind: Literal["plan", "decision"]) -> dict[str, Any]:
    """The JSON Schema of a plan, or of a decision about one, titled by what it is (a backend that names a
    structured answer, a tool or a response format, takes the title as its name)."""
    return _inlined_schema(PlanAnswer if kind == "plan" else DecisionAnswer) | {"title": kind}


def critique_json_schema() -> dict[str, Any]:
    """The JSON Schema a critic model's answer must follow, made from `CritiqueReport`."""
    return _inlined_schema(CritiqueReport)


def question_json_schema() -> dict[str, Any]:
    """The JSON Schema of a verifier model's chain-of-verification questions, made from `QuestionPlan`."""
    return _inlined_schema(QuestionPlan)


def _inlined_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """``struct``'s JSON Schema with references inlined.

    Grammar converters (llama.cpp's among them) and some structured-output APIs
    do not follow ``$ref``, and silently loosen the schema.
    """
    schema: dict[str, Any] = msgspec.json.schema(struct)
    inlined: dict[str, Any] = _inline(schema, schema.get("$defs", {}))
    inlined.pop("$defs", None)
    return inlined


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        inlined = {k: _inline(v, defs) for k, v in node.items() if k not in ("title", "description", "properties")}
        if "properties" in node:  # property names are data, not annotations: keep them all
            inlined["properties"] = {name: _inline(sub, defs) for name, sub in node["properties"].items()}
        return inlined
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node
