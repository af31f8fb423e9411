"""The wire protocol: round trips, the golden frames of the wire version, and clear errors for bad bytes."""

from __future__ import annotations

import msgpack
import msgspec
import pytest

from redraft.protocols import ProtocolError
from redraft.protocols.messages import (
    WIRE_VERSION,
    Draft,
    Task,
    decode,
    decode_as,
    encode,
    iter_frames,
)
from tests.support.paths import GOLDEN
from tests.support.samples import ALL, DRAFT, TASK


def _tag(message: object) -> str:
    return str(type(message).__struct_config__.tag)  # type: ignore[attr-defined]


def test_samples_cover_every_kind_of_the_union() -> None:
    from redraft.protocols.messages import Message

    kinds = {t.__struct_config__.tag for t in Message.__args__}  # type: ignore[attr-defined]
    assert {_tag(m) for m in ALL} == kinds
    assert {"task", "draft", "verification", "critique", "decision", "result"} <= kinds


@pytest.mark.parametrize("message", ALL, ids=_tag)
def test_round_trip(message: msgspec.Struct) -> None:
    frame = encode(message)  # type: ignore[arg-type]
    assert isinstance(frame, bytes)
    assert decode(frame) == message
    # Any MessagePack library reads a frame: a map with the tag and the wire version.
    plain = msgpack.unpackb(frame)
    assert plain["kind"] == _tag(message)
    assert plain["v"] == WIRE_VERSION


@pytest.mark.parametrize("message", ALL, ids=_tag)
def test_golden_frames_keep_decoding(message: msgspec.Struct) -> None:
    frame = (GOLDEN / f"v{WIRE_VERSION}" / f"{_tag(message)}.msgpack").read_bytes()
    assert decode(frame) == message


def test_the_golden_frames_are_of_this_wire_version_only() -> None:
    assert WIRE_VERSION == 1  # restarted with the first release, 0.1.0
    assert sorted(p.name for p in GOLDEN.iterdir()) == [f"v{WIRE_VERSION}"]
    assert {p.stem for p in (GOLDEN / f"v{WIRE_VERSION}").glob("*.msgpack")} == {_tag(m) for m in ALL}


def test_a_stance_outside_the_closed_set_is_refused_by_the_wire() -> None:
    frame = msgpack.unpackb(encode(ALL[5]))
    frame["stance"] = "friendly"
    with pytest.raises(ProtocolError, match=r"Invalid enum value 'friendly' - at `\$.stance`"):
        decode(msgpack.packb(frame))


def test_the_samples_set_every_field() -> None:
    """So the golden frames pin every field: none may sit at its default (the wire version ``v`` aside)."""
    for message in ALL:
        for field in msgspec.inspect.type_info(type(message)).fields:  # type: ignore[attr-defined]
            if field.name == "v":
                continue
            default = field.default_factory() if field.default_factory is not msgspec.NODEFAULT else field.default
            assert getattr(message, field.name) != default, f"{_tag(message)}.{field.name}"


def test_the_gold_never_travels_in_a_request_of_the_samples() -> None:
    requests = [m for m in ALL if _tag(m).endswith("_request") and _tag(m) != "grade_request"]
    assert requests and all(m.task.gold == {} for m in requests)  # type: ignore[attr-defined]


def test_trace_of_consecutive_frames_decodes_in_order() -> None:
    blob = b"".join(encode(m) for m in ALL)
    assert list(iter_frames(blob)) == ALL


def test_mistyped_field_names_the_path() -> None:
    bad = msgpack.packb({"kind": "draft", "task_id": "t", "round": "one", "sample": 0, "text": ""})
    with pytest.raises(ProtocolError, match=r"Expected `int`, got `str` - at `\$.round`"):
        decode(bad)


def test_nested_mistyped_field_names_the_nested_path() -> None:
    frame = msgpack.unpackb(encode(ALL[1]))
    frame["revision"]["issues"][0]["severity"] = "catastrophic"
    with pytest.raises(ProtocolError, match=r"at `\$.revision.issues\[0\].severity`"):
        decode(msgpack.packb(frame))


def test_missing_field_is_named() -> None:
    bad = msgpack.packb({"kind": "task", "scenario": "s", "prompt": "p"})
    with pytest.raises(ProtocolError, match="missing required field `task_id`"):
        decode(bad)


@pytest.mark.parametrize(
    "blob",
    [b"", b"\xc1", b"\x92\x01", encode(TASK)[:-3], b"not msgpack at all"],
    ids=["empty", "bad-opcode", "truncated-array", "truncated-frame", "text"],
)
def test_corrupt_bytes_raise_protocol_error(blob: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode(blob)


def test_unknown_kind_is_rejected() -> None:
    with pytest.raises(ProtocolError, match="Invalid value 'gossip'"):
        decode(msgpack.packb({"kind": "gossip", "task_id": "t"}))


def test_unknown_fields_from_a_newer_writer_are_ignored() -> None:
    frame = msgpack.unpackb(encode(TASK))
    frame["priority"] = 5
    assert decode(msgpack.packb(frame)) == TASK


def test_decode_as_rejects_another_kind() -> None:
    with pytest.raises(ProtocolError, match="expected a `draft` message, got `task`"):
        decode_as(encode(TASK), Draft)
    assert decode_as(encode(DRAFT), Draft) == DRAFT


def test_messages_are_frozen() -> None:
    with pytest.raises(AttributeError):
        TASK.prompt = "changed"  # type: ignore[misc]
    assert isinstance(TASK, Task)
