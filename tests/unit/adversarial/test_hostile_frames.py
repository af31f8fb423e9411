"""Hostile bytes: the wire decoders raise `ProtocolError` and nothing else, whatever they are fed.

Property tests (hypothesis, derandomized so CI replays the same cases) over every message kind
and over mutated golden frames, then a fixed corpus of the inputs that
once escaped as other exceptions (invalid UTF-8 in any string, nesting past the decoder's stack,
msgpack's own errors in a trace), each with the outcome it must have.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from redraft.protocols.messages import (
    Draft,
    Grade,
    Message,
    ProtocolError,
    Task,
    decode,
    decode_as,
    encode,
    iter_frames,
)
from tests.support.paths import GOLDEN as GOLDEN_DIR
from tests.support.samples import ALL, TASK

GOLDEN = sorted(GOLDEN_DIR.glob("v*/*.msgpack"))
KINDS: list[type[Any]] = list(Message.__args__)  # type: ignore[attr-defined]
PROPERTY = settings(
    max_examples=400, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)


def decodes_or_refuses(data: bytes) -> None:
    """The whole contract: each decoder returns messages or raises `ProtocolError`; nothing else escapes."""
    for read in (decode, lambda d: decode_as(d, Draft), lambda d: list(iter_frames(d))):
        try:
            read(data)
        except ProtocolError as exc:
            assert str(exc) and "\n" not in str(exc)


# ---------------------------------------------------------------- properties

# Any MessagePack value; ``bytes`` packed as *str* (use_bin_type=False) are strings that need not be UTF-8.
leaves = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text() | st.binary()
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(leaves, inner, max_size=4))


def _pack(obj: object) -> bytes:
    return msgpack.packb(obj, use_bin_type=False, strict_types=False)


def _paths(node: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every path to a value inside a decoded frame (map keys and list indexes)."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def _replace(node: Any, path: tuple[object, ...], value: object) -> Any:
    if not path:
        return value
    head, *rest = path
    copy = dict(node) if isinstance(node, dict) else list(node)
    copy[head] = _replace(node[head], tuple(rest), value)  # type: ignore[index]
    return copy


@PROPERTY
@given(st.sampled_from(GOLDEN), st.data())
def test_any_value_anywhere_in_a_golden_frame_decodes_or_is_refused(golden: Path, data: st.DataObject) -> None:
    frame = msgpack.unpackb(golden.read_bytes(), raw=False)
    path = data.draw(st.sampled_from(_paths(frame)), label="path")
    hostile = _replace(frame, path, data.draw(values, label="value"))
    decodes_or_refuses(_pack(hostile))


@PROPERTY
@given(st.sampled_from(GOLDEN), st.lists(st.tuples(st.integers(0), st.sampled_from("sdi"), st.binary(max_size=3))))
def test_mutated_golden_frames_decode_or_are_refused(golden: Path, edits: list[tuple[int, str, bytes]]) -> None:
    blob = bytearray(golden.read_bytes())
    for position, op, some in edits:
        at = position % (len(blob) + 1)
        if op == "s":
            blob[at : at + len(some)] = some
        elif op == "d":
            del blob[at : at + len(some) + 1]
        else:
            blob[at:at] = some
    decodes_or_refuses(bytes(blob))
    decodes_or_refuses(golden.read_bytes() + bytes(blob))  # a trace whose second frame is hostile


@PROPERTY
@given(st.binary(max_size=256))
def test_random_bytes_decode_or_are_refused(blob: bytes) -> None:
    decodes_or_refuses(blob)


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
st.register_type_strategy(Task, st.builds(Task, reference=st.dictionaries(st.text(max_size=5), json_like)))
grade = st.builds(Grade, gold=st.dictionaries(st.text(), json_like))
any_message = st.one_of(*(grade if kind is Grade else st.from_type(kind) for kind in KINDS))


@PROPERTY
@given(any_message, st.integers(0), st.binary(min_size=1, max_size=2))
def test_every_kind_encodes_or_is_refused_and_its_frame_survives_any_byte(
    message: Any, position: int, some: bytes
) -> None:
    try:
        frame = encode(message)
    except ProtocolError:  # an integer past 64 bits: refused where it is made, not half-written
        return
    assert encode(decode(frame)) == frame  # what encodes decodes to the same frame (NaN included)
    hostile = bytearray(frame)
    hostile[position % len(frame) : position % len(frame) + len(some)] = some
    decodes_or_refuses(bytes(hostile))


# ---------------------------------------------------------------- the fixed corpus

TASK_MAP = msgpack.unpackb(encode(TASK))


def _task_with(**fields: object) -> bytes:
    return _pack(TASK_MAP | fields)


def _task_frame(reference: bytes) -> bytes:
    """A task frame whose ``reference`` value is the raw MessagePack ``reference``."""
    pairs = [_pack(k) + _pack(v) for k, v in TASK_MAP.items() if k != "reference"]
    pairs.append(_pack("reference") + reference)
    return bytes([0x80 | len(pairs)]) + b"".join(pairs)


CORPUS = {
    # invalid UTF-8, the tag included: once UnicodeDecodeError
    "kind-not-utf8": (_pack({b"kind": b"t\xffsk"}), "not UTF-8"),
    "task-id-not-utf8": (_task_with(task_id=b"\xc3\x28"), "not UTF-8"),
    "reference-key-not-utf8": (_task_with(reference={b"\xed\xa0\x80": 1}), "not UTF-8"),  # an encoded surrogate
    "nested-prompt-not-utf8": (
        _pack(msgpack.unpackb(encode(ALL[1])) | {"task": TASK_MAP | {"prompt": b"\xf8\x88\x80\x80\x80"}}),
        "not UTF-8",
    ),
    # nesting past the decoder's stack: once RecursionError (decode) and StackError (iter_frames)
    "nested-200k-deep": (_task_frame(b"\x81\xa1a" + b"\x91" * 200_000 + b"\xc0"), "nested deeper"),
    "maps-nested-5k-deep": (_task_frame(b"\x81\xa1a" * 5_000 + b"\xc0"), "nested deeper"),
    # what msgpack itself refuses in a trace: once FormatError, TypeError, ValueError
    "reserved-byte": (b"\xc1", "corrupt"),
    "array-as-map-key": (_task_frame(b"\x81\x91\x01\x02"), "Expected `str`"),
    "bad-timestamp-ext": (_task_frame(b"\x81\xa1a\xc7\x03\xffxyz"), "Invalid MessagePack timestamp"),
    "unknown-tag": (_pack({"kind": ""}), "Invalid value ''"),
    "not-a-map": (_pack([1, 2, 3]), "Expected `object`, got `array`"),
}


@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_frame_is_refused_with_one_line(name: str) -> None:
    blob, says = CORPUS[name]
    with pytest.raises(ProtocolError) as info:
        decode(blob)
    assert says in str(info.value) and "\n" not in str(info.value)
    decodes_or_refuses(blob)


@pytest.mark.parametrize("name", list(CORPUS))
def test_a_trace_with_a_corpus_frame_keeps_what_came_before_and_names_the_offset(name: str) -> None:
    good = encode(TASK)
    frames = iter_frames(good + CORPUS[name][0] + good)
    assert next(frames) == TASK  # the frames before the fault are read
    with pytest.raises(ProtocolError, match=f"at byte {len(good)}"):
        next(frames)


def test_a_torn_last_frame_is_named_not_dropped() -> None:
    good = encode(TASK)
    with pytest.raises(ProtocolError, match="truncated"):
        decode(good[:-4])
    with pytest.raises(ProtocolError, match=f"truncated frame at byte {len(good)} of {2 * len(good) - 1}"):
        list(iter_frames(good + good[:-1]))
    assert list(iter_frames(good + good)) == [TASK, TASK]
    assert list(iter_frames(b"")) == []


def test_a_trace_larger_than_msgpacks_default_buffer_is_read_whole() -> None:
    big = Task(task_id="big", scenario="s", prompt="x" * (1 << 20))
    frames = encode(big) * 101  # 101 MiB: past msgpack's default 100 MiB buffer
    assert sum(1 for _ in iter_frames(frames)) == 101


@pytest.mark.parametrize(
    ("task", "says"),
    [
        (Task(task_id="\ud800", scenario="s", prompt="p"), "a string is not UTF-8"),
        (Task(task_id="t", scenario="s", prompt="a\udfffb"), "a string is not UTF-8"),
        (Task(task_id="t", scenario="s", prompt="p", reference={"n": 2**64}), "ints < -2**63 or > 2**64 - 1"),
        (Task(task_id="t", scenario="s", prompt="p", reference={"n": -(2**63) - 1}), "ints < -2**63 or > 2**64 - 1"),
        (Task(task_id="t", scenario="s", prompt="p", reference={"x": object()}), "unsupported"),
    ],
)
def test_a_message_that_cannot_be_a_frame_is_refused_by_encode(task: Task, says: str) -> None:
    with pytest.raises(ProtocolError) as info:
        encode(task)
    assert str(info.value).startswith("cannot encode a `task` message: ") and says in str(info.value)
