"""The wire protocol: round trips, golden frames of every version, and clear errors for bad bytes."""

from __future__ import annotations

import msgpack
import msgspec
import pytest

from redraft.protocols import ProtocolError
from redraft.protocols.messages import (
    WIRE_VERSION,
    Critique,
    Decision,
    Draft,
    Result,
    Task,
    decode,
    decode_as,
    encode,
    iter_frames,
)
from tests.support.paths import GOLDEN
from tests.support.samples import ALL, DRAFT, TASK, V1, V2, V3, V4


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


def _unversioned(message: object) -> object:
    """A message as plain data without its wire-version fields (``v``, nested messages included)."""

    def strip(node: object) -> object:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "v"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return strip(msgspec.to_builtins(message))


@pytest.mark.parametrize("message", V1, ids=_tag)
def test_golden_frames_of_v1_keep_decoding(message: msgspec.Struct) -> None:
    frame = (GOLDEN / "v1" / f"{_tag(message)}.msgpack").read_bytes()
    decoded = decode(frame)
    assert decoded.v == 1  # the writer's version survives; fields added since take their defaults
    assert _unversioned(decoded) == _unversioned(message)


@pytest.mark.parametrize("message", V2, ids=_tag)
def test_golden_frames_of_v2_keep_decoding(message: msgspec.Struct) -> None:
    frame = (GOLDEN / "v2" / f"{_tag(message)}.msgpack").read_bytes()
    decoded = decode(frame)
    assert decoded.v == 2  # the writer's version survives; fields added since take their defaults
    assert _unversioned(decoded) == _unversioned(message)


@pytest.mark.parametrize("message", V3, ids=_tag)
def test_golden_frames_of_v3_keep_decoding(message: msgspec.Struct) -> None:
    frame = (GOLDEN / "v3" / f"{_tag(message)}.msgpack").read_bytes()
    decoded = decode(frame)
    assert decoded.v == 3
    assert _unversioned(decoded) == _unversioned(message)


@pytest.mark.parametrize("message", V4, ids=_tag)
def test_golden_frames_of_v4_keep_decoding(message: msgspec.Struct) -> None:
    frame = (GOLDEN / "v4" / f"{_tag(message)}.msgpack").read_bytes()
    decoded = decode(frame)
    assert decoded.v == 4
    assert _unversioned(decoded) == _unversioned(message)


@pytest.mark.parametrize("message", ALL, ids=_tag)
def test_golden_frames_of_v5_keep_decoding(message: msgspec.Struct) -> None:
    frame = (GOLDEN / "v5" / f"{_tag(message)}.msgpack").read_bytes()
    assert decode(frame) == message


def test_the_none_that_versions_1_to_3_wrote_as_minus_one_or_empty_reads_as_none() -> None:
    old = {"v": 3, "task_id": "t", "round": 0}
    decision = {"kind": "decision", **old, "action": "stop", "reason": "error", "best_round": -1, "best_sample": -1}
    decision |= {"best_score": 0.0, "round_best_score": 0.0, "round_best_sample": -1}
    read = decode_as(msgpack.packb(decision), Decision)
    assert (read.best_round, read.best_sample, read.round_best_sample) == (None, None, None)
    result = msgpack.unpackb(encode(next(m for m in ALL if isinstance(m, Result))))
    result |= {"v": 3, "best_round": -1, "best_sample": -1, "initial_sample": -1}
    read_result = decode_as(msgpack.packb(result), Result)
    assert (read_result.best_round, read_result.best_sample, read_result.initial_sample) == (None, None, None)
    critique = {"kind": "critique", **old, "sample": 0, "stance": ""}
    assert decode_as(msgpack.packb(critique), Critique).stance is None
    # A real sample or round 0 is kept: only -1 meant "none".
    assert decode_as(msgpack.packb(decision | {"best_round": 0, "best_sample": 0}), Decision).best_round == 0


def test_a_stance_outside_the_closed_set_is_refused_by_the_wire() -> None:
    frame = msgpack.unpackb(encode(ALL[5]))
    frame["stance"] = "friendly"
    with pytest.raises(ProtocolError, match=r"Invalid enum value 'friendly' - at `\$.stance`"):
        decode(msgpack.packb(frame))


V3_ADDITIONS = {
    "task": ["gold"],
    "verification": ["oracle"],
    "critique_request": ["seed"],
    "reflect_request": ["seed"],
    "decision": ["limit", "round_best_sample"],
    "result": [
        "error_type",
        "stop_limit",
        "best_round",
        "best_sample",
        "grade",
        "graded_pass",
        "initial_grade",
    ],
    "grade_request": ["task", "candidates"],
    "grade": ["task_id", "gold", "grades", "error"],
}


def test_v3_samples_set_every_field_added_in_v3() -> None:
    """So the v3 golden frames pin each addition: none may sit at its default."""
    by_kind = {_tag(m): m for m in ALL}
    for kind, names in V3_ADDITIONS.items():
        for name in names:
            assert getattr(by_kind[kind], name) not in (None, "", 0, [], {}, False, -1), f"{kind}.{name}"
    assert by_kind["result"].initial_sample == 0 and by_kind["result"].initial_graded_pass is False


def test_the_gold_never_travels_in_a_request_of_the_samples() -> None:
    requests = [m for m in ALL if _tag(m).endswith("_request") and _tag(m) != "grade_request"]
    assert requests and all(m.task.gold == {} for m in requests)  # type: ignore[attr-defined]


V2_ADDITIONS = {
    "draft_request": ["stage", "mode"],
    "draft": ["stage", "edits_applied", "edit_errors"],
    "verify_request": ["stage", "questions"],
    "verification": ["stage", "questions", "usage", "model"],
    "critique_request": ["opponent"],
    "critique": ["stance"],
    "reflect_request": ["task", "draft", "failed_checks", "memory"],
    "reflection": ["task_id", "round", "sample", "text", "usage", "model"],
}


def test_v2_samples_set_every_field_added_in_v2() -> None:
    """So the v2 golden frames pin each addition: none may sit at its default (or be empty)."""
    by_kind = {_tag(m): m for m in V2}
    for kind, names in V2_ADDITIONS.items():
        for name in names:
            assert getattr(by_kind[kind], name) not in (None, "", 0, [], "rewrite"), f"{kind}.{name}"
    nested = by_kind["draft_request"].revision
    assert nested is not None and nested.questions and nested.memory[0].reflection


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


V4_ADDITIONS = {
    "draft": ["messages"],
    "critique": ["messages"],
    "reflection": ["messages"],
    "result": ["error_raised", "error_where", "traceback"],
}


def test_v4_samples_set_every_field_added_in_v4() -> None:
    """So the v4 golden frames pin each addition: none may sit at its default."""
    by_kind = {_tag(m): m for m in ALL}
    for kind, names in V4_ADDITIONS.items():
        for name in names:
            assert getattr(by_kind[kind], name) not in (None, "", [], {}), f"{kind}.{name}"


V5_ADDITIONS = {
    "draft_request": ["plan"],
    "verify_request": ["step"],
    "verification": ["observation"],
    "plan": ["steps", "trigger_step", "observation", "added", "removed", "changed", "kept"],
}


def test_v5_samples_set_every_field_added_in_v5() -> None:
    """So the v5 golden frames pin each addition: none may sit at its default."""
    by_kind = {_tag(m): m for m in ALL}
    for kind, names in V5_ADDITIONS.items():
        for name in names:
            assert getattr(by_kind[kind], name) not in (None, "", [], {}), f"{kind}.{name}"
