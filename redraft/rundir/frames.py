"""Trace frames decoded into the message Structs, without losing what this version does not know.

A frame of a kind this version knows, that validates as that kind, becomes a
`KnownFrame`: the typed message (`redraft.protocols.messages`), plus ``extra``,
the fields a newer writer added that the Struct does not have (msgspec would
ignore them; views still show them). Which fields are known is read from the
Struct itself (``__struct_fields__``), never from a table kept by hand. Fields
of the Struct that a frame lacks take their defaults, so older frames read too.

Anything else (a kind this version does not know, a frame that does not
validate as its kind, a value that is not a map, text damaged out of UTF-8, read
with U+FFFD where it does not decode) becomes a `GenericFrame`: its kind and its
fields as decoded. No frame is ever dropped, except the bytes after a torn or
corrupt point of the trace (`unpack_frames`); no frame makes a reader raise.

A task's byte range holds its frames when it splits into whole frames, at least one
of which names the task (its ``task_id``), none another task, and none a kind or task
in text that is not UTF-8: `task_span` checks it, reading only each frame's kind and
task, and `task_frames` decodes the frames it vouches for. A range that does not is
another run's bytes, or damage, and its frames are taken as lost.

See docs/architecture.md, section "Decoding frames at the typed decoder's speed".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, get_args

import msgpack
import msgspec

from redraft.protocols.messages import Message

S = TypeVar("S", bound=msgspec.Struct, covariant=True)

KINDS: dict[str, type[msgspec.Struct]] = {str(cls.__struct_config__.tag): cls for cls in get_args(Message)}
"""Every message kind of this version, by tag."""
_KNOWN_FIELDS: dict[type[msgspec.Struct], frozenset[str]] = {
    cls: frozenset(cls.__struct_fields__) | {"kind"} for cls in KINDS.values()
}
_MESSAGE: msgspec.msgpack.Decoder[Message] = msgspec.msgpack.Decoder(Message)
_ENCODER = msgspec.msgpack.Encoder()  # as the writer's (`redraft.protocols.messages.encode`)
# A frame's fields, their values left encoded: enough to read the kind and see which fields it has.
_FIELDS = msgspec.msgpack.Decoder(dict[str, msgspec.Raw])


@dataclass(frozen=True, slots=True)
class KnownFrame(Generic[S]):
    """A frame decoded as its kind's Struct."""

    message: S
    extra: dict[str, Any] = field(default_factory=dict)
    """Fields the Struct does not know (from a newer writer), as decoded."""

    @property
    def kind(self) -> str:
        return str(type(self.message).__struct_config__.tag)


@dataclass(frozen=True, slots=True)
class GenericFrame:
    """A frame of a kind this version does not know, or that does not validate as its kind."""

    kind: str
    fields: dict[str, Any]
    """Every field but ``kind``, as decoded."""


Frame = KnownFrame[Message] | GenericFrame


def decode_frame(data: bytes) -> Frame:
    """One MessagePack frame as a typed or a generic frame; never raises on a whole frame."""
    try:
        message: Message = _MESSAGE.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):  # unknown, invalid, damaged text
        return _generic(_untyped(data))
    if _ENCODER.encode(message) == data:  # the bytes of exactly the Struct's fields: nothing unknown
        return KnownFrame(message)
    try:
        fields = _FIELDS.decode(data)
    except UnicodeDecodeError:  # a key the Struct skipped, damaged out of UTF-8
        return _generic(_untyped(data))
    unknown = fields.keys() - _KNOWN_FIELDS[type(message)]
    if not unknown:
        return KnownFrame(message)
    return KnownFrame(message, {k: msgspec.msgpack.decode(v) for k, v in fields.items() if k in unknown})


def unpack_frames(data: bytes) -> list[Frame]:
    """Consecutive MessagePack frames; a torn or corrupt tail is dropped, what decoded before it is kept."""
    return [decode_frame(data[start:end]) for start, end in _spans(data)]


def task_span(data: bytes, task_id: str, *, trim: bool = False) -> int | None:
    """Where the frames of ``task_id`` begin in ``data``, its range's bytes; None if the range does not hold
    them (see the module docstring). ``trim``: the range may begin with other tasks' frames (a guessed start):
    the task's begin after the last frame that names another."""
    spans = list(_spans(data))
    if not spans or spans[-1][1] != len(data):
        return None
    begin, named = 0, False
    for start, end in spans:
        names = _names(data[start:end])
        if names is None:
            return None
        named_now = names.task_id
        if named_now is None:
            continue
        if named_now != task_id:
            if not trim:
                return None
            begin, named = end, False
        else:
            named = True
    return begin if named else None


def task_frames(data: bytes, task_id: str, *, trim: bool = False) -> list[Frame] | None:
    """The frames of ``task_id`` in its range's bytes, or None if the range does not hold them (`task_span`)."""
    begin = task_span(data, task_id, trim=trim)
    return None if begin is None else unpack_frames(data[begin:])


class _Names(msgspec.Struct):
    """What a frame is and whose, its other fields skipped."""

    kind: str = "?"
    task_id: str | None = None


_NAMES = msgspec.msgpack.Decoder(_Names)


def _names(frame: bytes) -> _Names | None:
    """What the frame is and whose; None when its kind or task is text that is not UTF-8 (damage: MessagePack's
    text always is), so its range is taken as lost rather than kept naming no task."""
    try:
        return _NAMES.decode(frame)
    except UnicodeDecodeError:
        return None
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):  # not a map, a kind or task not text
        return _Names()


def _spans(data: bytes) -> Iterator[tuple[int, int]]:
    """Where each whole frame is in ``data``, found without decoding it."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    start = 0
    while True:
        try:
            unpacker.skip()
        except (msgpack.OutOfData, msgpack.UnpackException, ValueError):
            return  # the end, or bytes that are not MessagePack: keep what came before them
        end = unpacker.tell()
        yield start, end
        start = end


def _untyped(data: bytes) -> Any:
    """A whole frame as plain values: its text that is not UTF-8 (damage) read with U+FFFD for what does not
    decode, so a reader shows the frame rather than fail on it."""
    try:
        return msgspec.msgpack.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):  # what msgspec does not take (a map key that is a map)
        return msgpack.unpackb(data, raw=False, strict_map_key=False, unicode_errors="replace")


def _generic(obj: Any) -> GenericFrame:
    if not isinstance(obj, dict):
        return GenericFrame(kind="?", fields={"value": obj})
    kind = obj.get("kind")
    return GenericFrame(
        kind=str(kind if kind is not None else "?"), fields={k: v for k, v in obj.items() if k != "kind"}
    )


def fields_of(frame: Frame) -> dict[str, Any]:
    """Every field of a frame as plain values (``kind`` aside): a typed message's and its extras alike."""
    if isinstance(frame, GenericFrame):
        return frame.fields
    values: dict[str, Any] = msgspec.to_builtins(frame.message)
    del values["kind"]
    return values | frame.extra
