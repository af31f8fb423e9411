"""The typed messages that cross every actor boundary, and their wire format.

Every message is a frozen, keyword-only `msgspec.Struct` in one tagged union
(`Message`, tag field ``kind``). Actors exchange the MessagePack bytes made by
`encode` and read them back with `decode`, which validates the whole frame
against the union; bad bytes raise `ProtocolError` naming the field path
(msgspec's own message, e.g. ``Expected `int`, got `str` - at `$.round` ``).
The run's ``trace.msgpack`` holds the same frames back to back, so any
MessagePack library in any language can read a run.

Schema-evolution rules (the wire version is `WIRE_VERSION`):

1. A new field gets a default and goes last in its Struct.
2. Removing or retyping a field, or changing a tag, is a new wire version.
3. Unknown fields are ignored when decoding, so an older reader accepts frames
   from a newer writer that only added fields.
4. Golden frames of every released version live in ``tests/golden/`` and must
   keep decoding (``tests/test_messages.py``).
5. A new kind is a new wire version: an older reader rejects it (a `ProtocolError`
   naming the unknown tag), so the version says which kinds a writer may send.

Versions: 1, the first release. 2 added the kinds ``reflect_request`` and
``reflection`` (Reflexion-style memory), stages (``DraftRequest.stage``,
``Draft.stage``, ``VerifyRequest.stage``, ``Verification.stage``), patch
revisions (``DraftRequest.mode``, ``Draft.edits_applied``, ``Draft.edit_errors``),
chain-of-verification questions (``VerifyRequest.questions``,
``Verification.questions``, with the verifier's ``usage`` and ``model``), debate
(``CritiqueRequest.opponent``, ``Critique.stance``) and ``Attempt.reflection``,
``Revision.questions``. Later additions within version 2 (fields only, with
defaults, so every v2 reader still reads them): ``Decision.limit``,
``Result.error_type`` and ``Result.stop_limit``, which name as typed values what
earlier frames said only in words (``detail``, ``error``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal, TypeVar

import msgpack
import msgspec

from redraft.errors import ProtocolError

WIRE_VERSION = 2

RevisionMode = Literal["rewrite", "patch"]
StopReason = Literal["threshold", "budget", "max_rounds", "stable", "no_improvement", "error"]
StopLimit = Literal["tokens", "calls", "usd", "task_timeout", "run_deadline"]
"""Which limit a ``budget`` stop hit: a per-task budget (tokens, calls, USD, the task timeout) or the run's deadline."""
Severity = Literal["critical", "major", "minor"]
Role = Literal["system", "user", "assistant"]

# Bounds on a critique, in the schema models must follow: they keep a grammar-
# constrained reply short enough to finish inside its token limit.
MAX_ISSUES = 2
MAX_ISSUE_TEXT = 100

# Bounds on chain-of-verification questions (count, characters), for the same reason.
MAX_QUESTIONS = 5
MAX_QUESTION_TEXT = 200

# How much an issue of each severity counts against a candidate when ranking ties.
SEVERITY_WEIGHT: dict[str, float] = {"critical": 3.0, "major": 2.0, "minor": 1.0}


# ---------------------------------------------------------------- embedded records


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens and calls spent by one or more model calls."""

    input_tokens: int = 0
    """Prompt tokens, as the backend reported them."""
    output_tokens: int = 0
    """Completion tokens, as the backend reported them."""
    calls: int = 0
    """Number of model calls."""
    cached_tokens: int = 0
    """Prompt tokens the provider served from its prompt cache (a subset of ``input_tokens``)."""
    cost_usd: float = 0.0
    """Priced by the arbiter from the price table (`redraft.pricing`); 0 in role replies."""
    cache_hits: int = 0
    """Calls answered by the response cache (their tokens were paid for once, earlier)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            calls=self.calls + other.calls,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            cache_hits=self.cache_hits + other.cache_hits,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens - other.input_tokens,
            output_tokens=self.output_tokens - other.output_tokens,
            calls=self.calls - other.calls,
            cached_tokens=self.cached_tokens - other.cached_tokens,
            cost_usd=self.cost_usd - other.cost_usd,
            cache_hits=self.cache_hits - other.cache_hits,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class ChatMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One turn of a chat prompt."""

    role: Role
    content: str


class CheckResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of one deterministic check of a candidate."""

    name: str
    """Short identifier of the check, e.g. ``final_answer`` or ``tests``."""
    passed: bool
    score: float
    """In [0, 1]."""
    detail: str = ""
    """Why it failed (or what it saw); shown to the drafter on revision."""


class Issue(msgspec.Struct, frozen=True, kw_only=True):
    """One concrete fault a critic found in a candidate.

    Models are asked to answer with `CritiqueReport`, whose JSON Schema is
    generated from these Structs (`critique_json_schema`).
    """

    severity: Severity
    """How bad: critical (the answer is wrong), major, or minor."""
    quote: Annotated[str, msgspec.Meta(max_length=MAX_ISSUE_TEXT)]
    """The exact span of the candidate that is wrong."""
    reason: Annotated[str, msgspec.Meta(max_length=MAX_ISSUE_TEXT)]
    """Why that span is wrong."""
    fix: Annotated[str, msgspec.Meta(max_length=MAX_ISSUE_TEXT)]
    """A concrete suggested correction."""


class CritiqueReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a critic model must answer: a list of issues (empty if none found)."""

    issues: Annotated[list[Issue], msgspec.Meta(max_length=MAX_ISSUES)]


class QuestionPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What a verifier model must answer when asked for chain-of-verification questions."""

    questions: Annotated[
        list[Annotated[str, msgspec.Meta(max_length=MAX_QUESTION_TEXT)]], msgspec.Meta(max_length=MAX_QUESTIONS)
    ]


class VerificationQuestion(msgspec.Struct, frozen=True, kw_only=True):
    """One chain-of-verification question about a candidate, answered without seeing the candidate."""

    question: str
    answer: str


class StageStep(msgspec.Struct, frozen=True, kw_only=True):
    """Which step of a top-down (``stepwise``) solution a draft is, and what it builds on."""

    name: str
    index: int
    """0-based position among the scenario's stages."""
    total: int
    instruction: str
    """What to write at this stage."""
    previous: str = ""
    """The verified output of the previous stage ('' for the first)."""

    @property
    def final(self) -> bool:
        return self.index + 1 >= self.total


class Attempt(msgspec.Struct, frozen=True, kw_only=True):
    """A short memory of an earlier round, so the drafter does not oscillate."""

    round: int
    answer: str | None
    score: float
    summary: str
    """The main failure of that attempt, in one line."""
    reflection: str = ""
    """The drafter's own diagnosis of the failure (Reflexion); '' when not asked for."""


class Revision(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the drafter needs to revise: the best so far and the feedback."""

    best_text: str
    best_score: float
    failed_checks: list[CheckResult] = []
    issues: list[Issue] = []
    memory: list[Attempt] = []
    questions: list[VerificationQuestion] = []
    """Chain-of-verification questions about the best so far, with answers found independently of it."""


# ---------------------------------------------------------------- the union


class _Frame(msgspec.Struct, tag_field="kind", frozen=True, kw_only=True, forbid_unknown_fields=False):
    v: int = WIRE_VERSION
    """Wire version of the writer."""


class Task(_Frame, tag="task", frozen=True, kw_only=True):
    """One unit of work: a prompt plus the reference data its checks need."""

    task_id: str
    scenario: str
    prompt: str
    reference: dict[str, Any] = {}
    """Scenario-specific data for the verifier (gold answer, tests...). Never shown to models."""


class DraftRequest(_Frame, tag="draft_request", frozen=True, kw_only=True):
    """Arbiter → drafter: write candidate ``sample`` of ``round``."""

    task: Task
    round: int
    sample: int
    seed: int
    revision: Revision | None = None
    stage: StageStep | None = None
    """Set by the ``stepwise`` strategy: write this stage only."""
    mode: RevisionMode = "rewrite"
    """``patch``: answer a revision with minimal search/replace edits, which the drafter applies."""


class Draft(_Frame, tag="draft", frozen=True, kw_only=True):
    """Drafter → arbiter: one candidate."""

    task_id: str
    round: int
    sample: int
    text: str
    usage: Usage = Usage()
    model: str = ""
    finish_reason: str = ""
    latency_s: float = 0.0
    node_id: str = ""
    """The Ray node the drafter ran on (empty outside Ray)."""
    stage: str | None = None
    """The stage this draft is of (``stepwise``), else None."""
    edits_applied: int = 0
    """Patch revisions: how many of the model's edits applied."""
    edit_errors: list[str] = []
    """Patch revisions: why each edit that did not apply was refused (fed back on the next revision)."""


class VerifyRequest(_Frame, tag="verify_request", frozen=True, kw_only=True):
    """Arbiter → verifier: check one draft against the task's hard evidence."""

    task: Task
    draft: Draft
    stage: str | None = None
    """Check the output of this intermediate stage (its stage check), not the final answer."""
    questions: int = 0
    """Chain of verification: ask the verifier's model up to this many questions about the candidate."""


class Verification(_Frame, tag="verification", frozen=True, kw_only=True):
    """Verifier → arbiter: the checks of one draft."""

    task_id: str
    round: int
    sample: int
    score: float
    passed: bool
    answer: str | None = None
    """The candidate's final answer as the scenario extracts it (for agreement)."""
    checks: list[CheckResult] = []
    stage: str | None = None
    questions: list[VerificationQuestion] = []
    """Chain-of-verification questions and their independent answers (they inform, they do not score)."""
    usage: Usage = Usage()
    """Model calls made for the questions (none for deterministic checks)."""
    model: str = ""


class CritiqueRequest(_Frame, tag="critique_request", frozen=True, kw_only=True):
    """Arbiter → critic: attack one draft."""

    task: Task
    draft: Draft
    stance: str = "adversarial"
    """Which critic instructions to use (``adversarial``, ``self``, ``skeptic``)."""
    opponent: list[Issue] = []
    """Debate: the other critic's issues with the previous best, to confirm, refute or add to."""


class Critique(_Frame, tag="critique", frozen=True, kw_only=True):
    """Critic → arbiter: the faults found in one draft."""

    task_id: str
    round: int
    sample: int
    issues: list[Issue] = []
    usage: Usage = Usage()
    model: str = ""
    error: str | None = None
    """Set when the critic's reply could not be used (the issues are then empty)."""
    stance: str = ""

    @property
    def severity(self) -> float:
        return sum(SEVERITY_WEIGHT[i.severity] for i in self.issues)


class ReflectRequest(_Frame, tag="reflect_request", frozen=True, kw_only=True):
    """Arbiter → drafter: diagnose why ``draft`` failed, in words, for the memory of later rounds."""

    task: Task
    draft: Draft
    failed_checks: list[CheckResult] = []
    memory: list[Attempt] = []


class Reflection(_Frame, tag="reflection", frozen=True, kw_only=True):
    """Drafter → arbiter: a short self-diagnosis of a failed attempt (Reflexion)."""

    task_id: str
    round: int
    sample: int
    text: str
    usage: Usage = Usage()
    model: str = ""


class Decision(_Frame, tag="decision", frozen=True, kw_only=True):
    """Arbiter's verdict after a round: go on, or stop and why."""

    task_id: str
    round: int
    action: Literal["continue", "stop"]
    reason: StopReason | None = None
    best_round: int
    best_sample: int
    best_score: float
    round_best_score: float
    rolled_back: bool = False
    """This round's best scored below the best so far, which was kept."""
    detail: str = ""
    limit: StopLimit | None = None
    """With reason ``budget``: which limit stopped the task (the detail says how much was spent)."""


class Result(_Frame, tag="result", frozen=True, kw_only=True):
    """The outcome of one task: the best candidate over all rounds."""

    task_id: str
    scenario: str
    answer: str | None
    text: str
    score: float
    passed: bool
    initial_score: float
    initial_passed: bool
    rounds: int
    stop_reason: StopReason
    usage: Usage
    wall_s: float
    error: str | None = None
    usage_by_role: dict[str, Usage] = {}
    """The same usage split by role (``drafter``, ``critic``, ``self_critic``)."""
    unpriced_models: list[str] = []
    """Models the price table does not know; their calls are counted at 0 USD."""
    error_type: str | None = None
    """With stop reason ``error``: the cause's exception class (``CheckError``, ``ModelError``...); ``error``
    holds the message. None in records written before this field existed."""
    stop_limit: StopLimit | None = None
    """With stop reason ``budget``: which limit stopped the task."""


Message = (
    Task
    | DraftRequest
    | Draft
    | VerifyRequest
    | Verification
    | CritiqueRequest
    | Critique
    | ReflectRequest
    | Reflection
    | Decision
    | Result
)

M = TypeVar("M", bound="_Frame")

_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[Message] = msgspec.msgpack.Decoder(Message)


def encode(message: Message) -> bytes:
    """The MessagePack frame of ``message``."""
    return _encoder.encode(message)


def decode(data: bytes) -> Message:
    """Validate and decode one frame; raise `ProtocolError` naming the bad field."""
    try:
        return _decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"invalid message: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"corrupt message: {exc}") from None


def decode_as(data: bytes, kind: type[M]) -> M:
    """Decode one frame and require it to be of ``kind``."""
    message = decode(data)
    if not isinstance(message, kind):
        raise ProtocolError(f"expected a `{_tag(kind)}` message, got `{_tag(type(message))}`")
    return message


def _tag(kind: type[msgspec.Struct]) -> str:
    return str(kind.__struct_config__.tag)


def iter_frames(data: bytes) -> Iterator[Message]:
    """Decode consecutive frames (a trace file's content), validating each."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    for obj in unpacker:
        yield convert(obj)


def convert(obj: Any) -> Message:
    """Validate an already-unpacked MessagePack object as a `Message`."""
    try:
        message: Message = msgspec.convert(obj, Message)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"invalid message: {exc}") from None
    return message


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
