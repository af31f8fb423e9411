"""The typed messages that cross every actor boundary, and their wire format.

Every message is a frozen, keyword-only `msgspec.Struct` in one tagged union
(`Message`, tag field ``kind``). Actors exchange the MessagePack bytes made by
`encode` and read them back with `decode`, which validates the whole frame
against the union; bad bytes raise `ProtocolError` naming the field path
(msgspec's own message, e.g. ``Expected `int`, got `str` - at `$.round` ``).
The run's ``trace.msgpack`` holds the same frames back to back, so any
MessagePack library in any language can read a run.

Invariant: whatever the bytes (invalid UTF-8 in any string, the ``kind`` tag
included; nesting deeper than the decoder's stack; a torn or garbage frame in a
trace), `decode`, `decode_as`, `iter_frames` and `convert` raise `ProtocolError`
and nothing else; and `encode` raises `ProtocolError` for a message that cannot
be a frame (a lone surrogate in a string, an integer outside 64 bits), so such a
value is refused where it is made, never half-written.
``tests/unit/adversarial/test_hostile_frames.py`` holds this by property tests
over every kind and over mutated golden frames, and keeps the inputs that once escaped.

Schema-evolution rules (the wire version is `WIRE_VERSION`):

1. A new field gets a default and goes last in its Struct.
2. Removing or retyping a field, or changing a tag, is a new wire version.
3. Unknown fields are ignored when decoding, so an older reader accepts frames
   from a newer writer that only added fields.
4. Golden frames of every released version live in ``tests/golden/`` and must
   keep decoding (``tests/unit/protocols/test_messages.py``).
5. A new kind is a new wire version: an older reader rejects it (a `ProtocolError`
   naming the unknown tag), so the version says which kinds a writer may send.

Versions: 1, the first release. 2 added the kinds ``reflect_request`` and
``reflection`` (Reflexion-style memory), stages (``DraftRequest.stage``,
``Draft.stage``, ``VerifyRequest.stage``, ``Verification.stage``), patch
revisions (``DraftRequest.mode``, ``Draft.edits_applied``, ``Draft.edit_errors``),
chain-of-verification questions (``VerifyRequest.questions``,
``Verification.questions``, with the verifier's ``usage`` and ``model``), debate
(``CritiqueRequest.opponent``, ``Critique.stance``) and ``Attempt.reflection``,
``Revision.questions``. 3 added held-out grading: the kinds ``grade_request``
and ``grade`` (sent by the driver after the loop, never to a role), ``Task.gold``
(stripped from every task a role receives), ``Verification.oracle``, and on
``Result`` the grades of the final answer and of round 0's leader with those
candidates' identity (``best_round``, ``best_sample``, ``initial_sample``); and
``Decision.round_best_sample``; typed values for what earlier frames said only in words: ``Decision.limit``,
``Result.stop_limit``, ``Result.error_type``; and ``CritiqueRequest.seed``,
``ReflectRequest.seed``, so the arbiter derives every seed by one rule.
Within version 3, ``Result.attempts`` and ``Result.retried_for`` were added (rule 1):
how often the driver redid a task because the machinery failed under it.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, Literal, TypeVar

import msgpack
import msgspec

from redraft.errors import ProtocolError
from redraft.protocols.records import (
    MAX_ISSUE_TEXT,
    Attempt,
    CandidateGrade,
    CandidateText,
    ChatMessage,
    CheckResult,
    Issue,
    Revision,
    RevisionMode,
    Role,
    Severity,
    StageStep,
    StopLimit,
    StopReason,
    Usage,
    VerificationQuestion,
)

__all__ = [  # the frames, and the records they embed (re-exported: they are part of the messages)
    "MAX_ISSUE_TEXT",
    "WIRE_VERSION",
    "Attempt",
    "CandidateGrade",
    "CandidateText",
    "ChatMessage",
    "CheckResult",
    "Critique",
    "CritiqueRequest",
    "Decision",
    "Draft",
    "DraftRequest",
    "Grade",
    "GradeRequest",
    "Issue",
    "Message",
    "ProtocolError",
    "ReflectRequest",
    "Reflection",
    "Result",
    "Revision",
    "RevisionMode",
    "Role",
    "Severity",
    "StageStep",
    "StopLimit",
    "StopReason",
    "Task",
    "Usage",
    "Verification",
    "VerificationQuestion",
    "VerifyRequest",
    "convert",
    "decode",
    "decode_as",
    "encode",
    "iter_frames",
]

WIRE_VERSION = 3

# ---------------------------------------------------------------- the union


class _Frame(msgspec.Struct, tag_field="kind", frozen=True, kw_only=True, forbid_unknown_fields=False):
    v: int = WIRE_VERSION
    """Wire version of the writer."""


class Task(_Frame, tag="task", frozen=True, kw_only=True):
    """One unit of work: a prompt, the data its feedback checks may use, and the held-out gold of its grade."""

    task_id: str
    scenario: str
    prompt: str
    reference: dict[str, Any] = {}
    """Data the scenario's feedback checks use (a schema, the prompt's code...): what a user has at
    inference time. Never shown to models (v1 and v2 writers put gold here too)."""
    gold: dict[str, Any] = {}
    """Held-out data for the grade only (gold answers, hidden tests). The driver strips it from the
    task every role receives; only oracle-feedback runs let it into the loop."""

    def without_gold(self) -> Task:
        """This task as the loop sees it: the gold removed."""
        return msgspec.structs.replace(self, gold={}) if self.gold else self


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
    oracle: bool = False
    """The checks are the held-out grade, fed back as feedback (an oracle-feedback run)."""


class CritiqueRequest(_Frame, tag="critique_request", frozen=True, kw_only=True):
    """Arbiter → critic: attack one draft."""

    task: Task
    draft: Draft
    stance: str = "adversarial"
    """Which critic instructions to use (``adversarial``, ``self``, ``skeptic``)."""
    opponent: list[Issue] = []
    """Debate: the other critic's issues with the previous best, to confirm, refute or add to."""
    seed: int | None = None
    """The critic model's sampling seed, derived by the arbiter like every other seed (None: the backend's)."""


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


class ReflectRequest(_Frame, tag="reflect_request", frozen=True, kw_only=True):
    """Arbiter → drafter: diagnose why ``draft`` failed, in words, for the memory of later rounds."""

    task: Task
    draft: Draft
    failed_checks: list[CheckResult] = []
    memory: list[Attempt] = []
    seed: int | None = None
    """The model's sampling seed, derived by the arbiter (None: the backend's)."""


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
    round_best_sample: int = -1
    """The sample of this round's best candidate, the one a revision produced (-1: none)."""


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
    best_round: int = -1
    """The round of the final answer (-1: none)."""
    best_sample: int = -1
    initial_sample: int = -1
    """The sample of round 0's leader (-1: none)."""
    grade: float | None = None
    """The held-out grade of the final answer, in [0, 1]; None when the task has no grade."""
    graded_pass: bool | None = None
    initial_grade: float | None = None
    """The held-out grade of round 0's leader; None when the task has no grade."""
    initial_graded_pass: bool | None = None
    attempts: int = 1
    """How many times the driver sent the task out: more than 1 when the machinery failed under it."""
    retried_for: list[str] = []
    """The cause of each earlier attempt's failure (``ActorDiedError``, ``CallTimeoutError``...): never the task's."""


class GradeRequest(_Frame, tag="grade_request", frozen=True, kw_only=True):
    """Driver -> grader, after the loop: grade these candidates against the task's held-out gold."""

    task: Task
    candidates: list[CandidateText] = []


class Grade(_Frame, tag="grade", frozen=True, kw_only=True):
    """Grader -> driver: the held-out grade of each candidate, and the gold it was graded against."""

    task_id: str
    gold: dict[str, Any] = {}
    grades: list[CandidateGrade] = []
    error: str | None = None
    """Set when the grade itself failed (a broken grade function): the grades are then missing, not 0."""


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
    | GradeRequest
    | Grade
)

M = TypeVar("M", bound="_Frame")

_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[Message] = msgspec.msgpack.Decoder(Message)


def encode(message: Message) -> bytes:
    """The MessagePack frame of ``message``; `ProtocolError` if a value in it cannot be one."""
    try:
        return _encoder.encode(message)
    except UnicodeEncodeError as exc:  # a lone surrogate (U+D800) is a Python str but not UTF-8
        reason = f"a string is not UTF-8 ({exc.reason})"
    except (OverflowError, TypeError, ValueError, RecursionError) as exc:  # 2**64, an unknown type, deep nesting
        reason = _reason(exc)
    raise ProtocolError(f"cannot encode a `{_tag(type(message))}` message: {reason}")


def decode(data: bytes | memoryview) -> Message:
    """Validate and decode one frame; raise `ProtocolError` naming the bad field, and nothing else."""
    try:
        return _decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"invalid message: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"corrupt message: {exc}") from None
    except UnicodeDecodeError as exc:  # msgspec checks UTF-8 after the type: any string, the tag too
        raise ProtocolError(f"corrupt message: a string is not UTF-8 ({exc.reason})") from None
    except RecursionError:
        raise ProtocolError("corrupt message: nested deeper than the decoder's stack") from None


def decode_as(data: bytes | memoryview, kind: type[M]) -> M:
    """Decode one frame and require it to be of ``kind``."""
    message = decode(data)
    if not isinstance(message, kind):
        raise ProtocolError(f"expected a `{_tag(kind)}` message, got `{_tag(type(message))}`")
    return message


def _tag(kind: type[msgspec.Struct]) -> str:
    return str(kind.__struct_config__.tag)


def _reason(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__


def iter_frames(data: bytes) -> Iterator[Message]:
    """Decode consecutive frames (a trace file's content), validating each exactly as `decode` does.

    MessagePack itself only finds where each frame ends (without building it); a torn last
    frame or bytes that are no frame at all raise `ProtocolError` naming the byte offset,
    so nothing is silently dropped. Frames before the fault have been yielded.
    """
    view = memoryview(data)
    framing = msgpack.Unpacker(io.BytesIO(data), max_buffer_size=0)  # 0: no cap below 4 GiB on one frame
    start = 0
    while start < len(view):
        try:
            framing.skip()
        except msgpack.OutOfData:
            raise ProtocolError(f"truncated frame at byte {start} of {len(view)}") from None
        except (msgpack.UnpackException, ValueError) as exc:  # FormatError, StackError (deep nesting)
            raise ProtocolError(f"corrupt frame at byte {start}: {_reason(exc)}") from None
        end = framing.tell()
        try:
            message = decode(view[start:end])
        except ProtocolError as exc:
            raise ProtocolError(f"frame at byte {start}: {exc}") from None
        yield message
        start = end


def convert(obj: Any) -> Message:
    """Validate an already-unpacked MessagePack object as a `Message`; `ProtocolError` if it is not one."""
    try:
        message: Message = msgspec.convert(obj, Message)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"invalid message: {exc}") from None
    except RecursionError:
        raise ProtocolError("invalid message: nested deeper than the decoder's stack") from None
    return message
