"""Trace frames decoded into the message Structs, without losing what this version does not know.

A frame of a kind this version knows, that validates as that kind, becomes a
`KnownFrame`: the typed message (`redraft.protocols.messages`), plus ``extra``,
the fields a newer writer added that the Struct does not have (msgspec would
ignore them; views still show them). Which fields are known is read from the
Struct itself (``__struct_fields__``), never from a table kept by hand. Fields
of the Struct that a frame lacks take their defaults, so older frames read too.

Anything else (a kind this version does not know, a frame that does not
validate as its kind, a value that is not a map) becomes a `GenericFrame`: its
kind and its fields as decoded. No frame is ever dropped, except the bytes after
a torn or corrupt point of the trace (`unpack_frames`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, get_args

import msgpack
import msgspec

from redraft.protocols.messages import Message

S = TypeVar("S", bound=msgspec.Struct, covariant=True)

KINDS: dict[str, type[msgspec.Struct]] = {str(cls.__struct_config__.tag): cls for cls in get_args(Message)}
"""Every message kind of this version, by tag."""
_KNOWN_FIELDS: dict[str, frozenset[str]] = {
    kind: frozenset(cls.__struct_fields__) | {"kind"} for kind, cls in KINDS.items()
}


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


def decode_frame(obj: Any) -> Frame:
    """One unpacked MessagePack value as a frame; never raises."""
    if not isinstance(obj, dict):
        return GenericFrame(kind="?", fields={"value": obj})
    kind = obj.get("kind")
    cls = KINDS.get(kind) if isinstance(kind, str) else None
    fields = {k: v for k, v in obj.items() if k != "kind"}
    if cls is None:
        return GenericFrame(kind=str(kind if kind is not None else "?"), fields=fields)
    try:
        message: Message = msgspec.convert(obj, cls)  # type: ignore[assignment]
    except msgspec.ValidationError:
        return GenericFrame(kind=str(kind), fields=fields)
    known = _KNOWN_FIELDS[str(kind)]
    return KnownFrame(message, {k: v for k, v in obj.items() if k not in known})


def unpack_frames(data: bytes) -> list[Frame]:
    """Consecutive MessagePack frames; a torn or corrupt tail is dropped, what decoded before it is kept."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    frames: list[Frame] = []
    try:
        for obj in unpacker:
            frames.append(decode_frame(obj))
    except (msgpack.UnpackException, ValueError):
        pass  # bytes that are not MessagePack: show what decoded before them
    return frames


def fields_of(frame: Frame) -> dict[str, Any]:
    """Every field of a frame as plain values (``kind`` aside): a typed message's and its extras alike."""
    if isinstance(frame, GenericFrame):
        return frame.fields
    values: dict[str, Any] = msgspec.to_builtins(frame.message)
    del values["kind"]
    return values | frame.extra
