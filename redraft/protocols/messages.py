"""The typed messages that cross every actor boundary, and their wire format.

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

See docs/architecture.md, section "Messages and frames".
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, TypeVar

import msgpack
import msgspec

from redraft.errors import ProtocolError
from redraft.protocols._kinds import (
    WIRE_VERSION,
    Critique,
    CritiqueRequest,
    Decision,
    Draft,
    DraftRequest,
    Grade,
    GradeRequest,
    PlanVersion,
    Reflection,
    ReflectRequest,
    Result,
    Task,
    Verification,
    VerifyRequest,
    _Frame,
)
from redraft.protocols._plans import (
    ColumnProfile,
    ColumnType,
    Observation,
    PlanAction,
    PlanAsk,
    PlanAskKind,
    PlanStep,
    StepContract,
    StepRun,
)
from redraft.protocols._records import (
    MAX_ISSUE_TEXT,
    Action,
    Attempt,
    CandidateGrade,
    CandidateText,
    ChatMessage,
    ChatRole,
    CheckResult,
    FeedbackState,
    Intent,
    Issue,
    Revision,
    RevisionMode,
    RoleName,
    Severity,
    StageStep,
    Stance,
    StopLimit,
    StopReason,
    Usage,
    VerificationQuestion,
)
from redraft.protocols.bounds import MAX_FRAME_BYTES, bounded

__all__ = [  # the frames, and the records they embed (re-exported: they are part of the messages)
    "MAX_ISSUE_TEXT",
    "WIRE_VERSION",
    "Action",
    "Attempt",
    "CandidateGrade",
    "CandidateText",
    "ChatMessage",
    "ChatRole",
    "CheckResult",
    "ColumnProfile",
    "ColumnType",
    "Critique",
    "CritiqueRequest",
    "Decision",
    "Draft",
    "DraftRequest",
    "FeedbackState",
    "Grade",
    "GradeRequest",
    "Intent",
    "Issue",
    "Message",
    "Observation",
    "PlanAction",
    "PlanAsk",
    "PlanAskKind",
    "PlanStep",
    "PlanVersion",
    "ProtocolError",
    "ReflectRequest",
    "Reflection",
    "Result",
    "Revision",
    "RevisionMode",
    "RoleName",
    "Severity",
    "StageStep",
    "Stance",
    "StepContract",
    "StepRun",
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
    | PlanVersion
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
        return bounded(_decoder.decode, data, what="a frame", max_bytes=MAX_FRAME_BYTES, json=False)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"invalid message: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"corrupt message: {exc}") from None
    except UnicodeDecodeError as exc:  # msgspec checks UTF-8 after the type: any string, the tag too
        raise ProtocolError(f"corrupt message: a string is not UTF-8 ({exc.reason})") from None


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
