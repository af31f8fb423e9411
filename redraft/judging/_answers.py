"""What a judge model must answer in: a level and a reason per criterion of a rubric, or a pairwise verdict.

The rubric's schema is made from the rubric itself: the criterion and level names are enums, so a backend
that enforces a schema (a llama.cpp grammar, a provider's structured output) cannot let the model name a
level that does not exist. A reply is then validated against the Struct and the rubric: a reply that names
an unknown level, leaves a criterion out or is not JSON is a `JudgeAnswerError`, and the judgment carries it
as its error (a misbehaving judge costs its grade, never the task). The bounds keep a grammar-constrained
reply short enough to finish inside its token limit.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from redraft.judging.rubric import MAX_CRITERIA, Rubric
from redraft.protocols.bounds import bounded

T = TypeVar("T")
MAX_REASON = 300
"""Characters of one reason at most."""


class CriterionAnswer(msgspec.Struct, frozen=True, kw_only=True):
    criterion: Annotated[str, msgspec.Meta(max_length=40)]
    level: Annotated[str, msgspec.Meta(max_length=40)]
    reason: Annotated[str, msgspec.Meta(max_length=MAX_REASON)]


class RubricAnswer(msgspec.Struct, frozen=True, kw_only=True):
    criteria: Annotated[list[CriterionAnswer], msgspec.Meta(max_length=MAX_CRITERIA)]


class PairAnswer(msgspec.Struct, frozen=True, kw_only=True):
    winner: Literal["first", "second", "tie"]
    reason: Annotated[str, msgspec.Meta(max_length=MAX_REASON)]


class JudgeAnswerError(ValueError):
    """A judge's reply that is not a valid answer (the judgment records it as its error)."""


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")
_CONTROL = {code: " " for code in range(0x20)}  # raw control characters are invalid in JSON strings
_rubric_decoder = msgspec.json.Decoder(RubricAnswer)
_pair_decoder = msgspec.json.Decoder(PairAnswer)


def rubric_schema(rubric: Rubric) -> dict[str, Any]:
    """The JSON Schema of a judge's answer under ``rubric``, titled ``grade``: one entry per criterion, in the
    rubric's order, each naming its criterion and one of that criterion's own levels (``prefixItems``, so a
    grammar cannot let a model grade one criterion twice and leave another out, as the embedded model did)."""
    entries = [
        {
            "type": "object",
            "properties": {
                "criterion": {"enum": [c.name]},
                "level": {"enum": [level.name for level in c.levels]},
                "reason": {"type": "string", "maxLength": MAX_REASON},
            },
            "required": ["criterion", "level", "reason"],
        }
        for c in rubric.criteria
    ]
    count = len(entries)
    answers = {"type": "array", "prefixItems": entries, "items": False, "minItems": count, "maxItems": count}
    return {"title": "grade", "type": "object", "properties": {"criteria": answers}, "required": ["criteria"]}


def pair_schema() -> dict[str, Any]:
    """The JSON Schema of a pairwise verdict, titled ``verdict``."""
    return {
        "title": "verdict",
        "type": "object",
        "properties": {
            "winner": {"enum": ["first", "second", "tie"]},
            "reason": {"type": "string", "maxLength": MAX_REASON},
        },
        "required": ["winner", "reason"],
    }


def parse_levels(text: str, rubric: Rubric) -> dict[str, tuple[str, str]]:
    """Criterion -> (level, reason) from a judge's reply; `JudgeAnswerError` unless it names one known level
    for every criterion of ``rubric``."""
    answer = decoded(_rubric_decoder, text, "a rubric grade")
    chosen: dict[str, tuple[str, str]] = {}
    for entry in answer.criteria:
        criterion = next((c for c in rubric.criteria if c.name == entry.criterion), None)
        if criterion is None or criterion.level(entry.level) is None:
            raise JudgeAnswerError(f"no level {entry.level!r} of a criterion {entry.criterion!r} in the rubric")
        chosen.setdefault(entry.criterion, (entry.level, entry.reason))
    missing = [c.name for c in rubric.criteria if c.name not in chosen]
    if missing:
        raise JudgeAnswerError(f"no level for {', '.join(missing)}")
    return chosen


def parse_pair(text: str) -> PairAnswer:
    """A pairwise verdict from a judge's reply; `JudgeAnswerError` if it is not one."""
    return decoded(_pair_decoder, text, "a pairwise verdict")


def decoded(decoder: msgspec.json.Decoder[T], text: str, what: str) -> T:
    """``text`` (a model's reply, fenced in a code block or not) decoded; `JudgeAnswerError` if it is not ``what``."""
    cleaned = _FENCE.sub("", text.strip()).translate(_CONTROL)
    try:
        return bounded(decoder.decode, cleaned, what=what)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise JudgeAnswerError(f"the judge's reply is not {what} ({exc}); it began {text[:80]!r}") from None
