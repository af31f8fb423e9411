"""The run directory's one reading rule, and records and frames decoded into the message Structs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgpack
import msgspec
import pytest

from redraft.protocols.messages import WIRE_VERSION, Decision, Draft, Result, Task, Usage, Verification, encode
from redraft.rundir import GenericFrame, KnownFrame, RunReader, RunStore, fingerprint
from redraft.rundir._results import decode_record, read_results
from redraft.rundir.frames import decode_frame, fields_of, unpack_frames
from redraft.rundir.layout import RESULTS, TRACE
from tests.support.paths import GOLDEN


def result(task_id: str, **fields: Any) -> Result:
    base: dict[str, Any] = {
        "scenario": "arithmetic",
        "answer": "1",
        "text": "Answer: 1",
        "score": 1.0,
        "passed": True,
        "initial_score": 0.0,
        "initial_passed": False,
        "rounds": 2,
        "stop_reason": "threshold",
        "usage": Usage(calls=3),
        "wall_s": 0.1,
    }
    return Result(task_id=task_id, **(base | fields))


def written(root: Path, n: int) -> list[int]:
    """A finished run of ``n`` tasks at ``root``; the byte offset where each result line ends."""
    identity = {"scenario": "arithmetic"}
    store = RunStore.open(root, {"identity": identity, "fingerprint": fingerprint(identity)})
    for i in range(n):
        task = Task(task_id=f"t{i}", scenario="arithmetic", prompt="p")
        store.append([encode(task), encode(result(f"t{i}"))], result(f"t{i}"))
    store.finish(1.0)
    ends, offset = [], 0
    for line in (root / RESULTS).read_bytes().splitlines(keepends=True):
        offset += len(line)
        ends.append(offset)
    return ends


def damage(root: Path, how: str) -> None:
    """Spoil the third of four result lines (or the tail), as a crash or a foreign tool could."""
    lines = (root / RESULTS).read_bytes().splitlines(keepends=True)
    record = json.loads(lines[2])
    match how:
        case "torn":
            lines = [*lines[:3], lines[3][:-9]]  # the last line only: a writer killed mid-line
        case "bad json":
            lines[2] = b'{"task_id": "t2", oops}\n'
        case "not a result":
            del record["passed"]
            lines[2] = json.dumps(record).encode() + b"\n"
        case "frames lost":  # a machine crash kept the results but not the end of the trace
            with open(root / TRACE, "r+b") as f:
                f.truncate(record["trace_end"] - 1)
    (root / RESULTS).write_bytes(b"".join(lines))


@pytest.mark.parametrize("how", ["torn", "bad json", "not a result", "frames lost"])
def test_the_writer_and_the_reader_keep_the_same_records(how: str, tmp_path: Path) -> None:
    written(tmp_path / "read", 4)
    written(tmp_path / "resumed", 4)
    for root in (tmp_path / "read", tmp_path / "resumed"):
        damage(root, how)
    # Record by record: a damaged line costs that line (its task redone), frames lost cost the trace only.
    kept = {"torn": ["t0", "t1", "t2"], "frames lost": ["t0", "t1", "t2", "t3"]}.get(how, ["t0", "t1", "t3"])
    traced = ["t0", "t1"] if how == "frames lost" else kept
    reader = RunReader(tmp_path / "read")
    assert [e.task_id for e in reader.entries()] == kept
    assert [e.task_id for e, frames in reader.tasks() if frames and not e.lost] == traced
    identity = {"scenario": "arithmetic"}
    store = RunStore.open(tmp_path / "resumed", {"identity": identity, "fingerprint": fingerprint(identity)})
    assert store.done == set(kept) and store.spent.calls == 3 * len(kept)
    assert [e.task_id for e in read_results(tmp_path / "resumed")] == kept
    resumed = RunReader(tmp_path / "resumed")
    assert [e.task_id for e, frames in resumed.tasks() if frames and not e.lost] == traced


def test_a_record_decodes_into_the_result_struct_whatever_version_wrote_it() -> None:
    newer = msgspec.to_builtins(result("t")) | {"trace_end": 12, "novelty": {"x": 1}}
    del newer["kind"], newer["v"]
    decoded = decode_record(newer)
    assert decoded == result("t")  # the tag absent, trace_end and the unknown field ignored
    older = {k: v for k, v in newer.items() if k not in ("usage_by_role", "unpriced_models", "error_type")}
    assert decode_record(older) == result("t")  # fields added since take their defaults
    with pytest.raises(msgspec.ValidationError):
        decode_record({k: v for k, v in newer.items() if k != "score"})


def test_unknown_record_fields_are_kept_aside(tmp_path: Path) -> None:
    written(tmp_path, 1)
    record = json.loads((tmp_path / RESULTS).read_text()) | {"novelty": [1, 2]}
    (tmp_path / RESULTS).write_text(json.dumps(record) + "\n")
    [entry] = RunReader(tmp_path).entries()
    assert entry.extra == {"novelty": [1, 2]} and entry.result == result("t0")
    assert entry.start == 0 and entry.end == record["trace_end"]


def test_every_field_of_every_golden_frame_is_known() -> None:
    """Which fields are known comes from the Structs: golden frames decode with nothing left over."""
    for path in sorted((GOLDEN / f"v{WIRE_VERSION}").glob("*.msgpack")):
        frame = decode_frame(path.read_bytes())
        assert isinstance(frame, KnownFrame), path.name
        assert frame.kind == path.stem and frame.extra == {}, path.name


def test_unknown_fields_are_kept_as_extra_and_bad_frames_as_generic() -> None:
    decision = msgspec.to_builtins(
        Decision(task_id="t", round=0, action="stop", best_round=0, best_sample=0, best_score=1.0, round_best_score=1)
    )
    frames = unpack_frames(
        b"".join(
            msgpack.packb(f)
            for f in (
                decision | {"confidence": 0.25},
                {"kind": "audit_note", "task_id": "t", "note": "hi"},
                {"kind": "draft", "task_id": "t", "round": 0},  # no sample, no text: not a valid draft
                [1, 2],
            )
        )
        + b"\x92\xc1"  # a torn, corrupt tail
    )
    known, audit, bad_draft, odd = frames
    assert isinstance(known, KnownFrame) and isinstance(known.message, Decision)
    assert known.extra == {"confidence": 0.25}
    assert fields_of(known)["confidence"] == 0.25 and fields_of(known)["action"] == "stop"
    assert audit == GenericFrame(kind="audit_note", fields={"task_id": "t", "note": "hi"})
    assert bad_draft == GenericFrame(kind="draft", fields={"task_id": "t", "round": 0})
    assert odd == GenericFrame(kind="?", fields={"value": [1, 2]})


def test_older_frames_take_the_defaults_of_newer_fields() -> None:
    draft = {"kind": "draft", "v": 1, "task_id": "t", "round": 0, "sample": 1, "text": "x"}
    frame = decode_frame(msgpack.packb(draft))
    assert isinstance(frame, KnownFrame) and frame.message == Draft(v=1, task_id="t", round=0, sample=1, text="x")
    verification = decode_frame(
        msgpack.packb({"kind": "verification", "task_id": "t", "round": 0, "sample": 1, "score": 1, "passed": True})
    )
    assert isinstance(verification, KnownFrame) and isinstance(verification.message, Verification)
    assert verification.message.usage == Usage() and verification.extra == {}
