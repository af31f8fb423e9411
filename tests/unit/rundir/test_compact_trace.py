"""The trace's compressed blocks (`redraft.rundir._blocks`): each task one zstd frame, the run's dictionary, and
what damage to either costs. Before, the trace held every frame raw: 25 KB a task on the reference workload."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest

from redraft.protocols.messages import Result, Task, Usage, encode, iter_frames
from redraft.rundir import RunReader, RunStore, fingerprint, result_records, trace_bytes
from redraft.rundir._blocks import DICTIONARY, MAGIC, TRAIN_AFTER
from redraft.rundir._results import result_line
from redraft.rundir.layout import RESULTS, TRACE

TASKS = TRAIN_AFTER + 16


def manifest() -> dict[str, Any]:
    identity = {"scenario": "arithmetic"}
    return {"identity": identity, "fingerprint": fingerprint(identity)}


def task_frames(i: int) -> tuple[list[bytes], Result]:
    """A task whose prompt is mostly the instructions every task shares, and an answer of its own."""
    rng = random.Random(i)
    numbers = " + ".join(str(rng.randrange(1000)) for _ in range(8))
    shared = "You are a careful solver. Show each step on its own line, then 'Answer: N'. " * 20
    task = Task(task_id=f"t{i}", scenario="arithmetic", prompt=f"{shared}\nWhat is {numbers}?", reference={})
    result = Result(
        task_id=task.task_id,
        scenario="arithmetic",
        answer=str(i),
        text=f"{numbers} = {i}\nAnswer: {i}",
        score=1.0,
        passed=True,
        initial_score=0.0,
        initial_passed=False,
        rounds=2,
        stop_reason="threshold",
        usage=Usage(input_tokens=10 + i, output_tokens=5, calls=3),
        wall_s=0.1,
    )
    return [encode(task), encode(result)], result


def write(root: Path, tasks: range) -> RunStore:
    store = RunStore.open(root, manifest())
    for i in tasks:
        store.append(*task_frames(i))
    return store


def ranges(root: Path) -> list[tuple[int, int]]:
    return [(r["trace_start"], r["trace_end"]) for r in map(json.loads, (root / RESULTS).read_text().splitlines())]


def test_every_task_is_one_zstd_frame_and_reads_back_whole(tmp_path: Path) -> None:
    write(tmp_path, range(TASKS)).finish(1.0)
    data = (tmp_path / TRACE).read_bytes()
    assert all(data[start : start + 4] == MAGIC for start, _ in ranges(tmp_path))
    raw = sum(len(b"".join(task_frames(i)[0])) for i in range(TASKS))
    assert len(data) < raw / 4  # the shared instructions are stored once, in the dictionary
    read = [(entry.task_id, [f.kind for f in frames]) for entry, frames in RunReader(tmp_path).tasks()]
    assert read == [(f"t{i}", ["task", "result"]) for i in range(TASKS)]
    assert [m.task_id for m in iter_frames(trace_bytes(tmp_path)) if isinstance(m, Result)] == [
        f"t{i}" for i in range(TASKS)
    ]


def test_the_dictionary_is_trained_once_and_named_by_the_frames_after_it(tmp_path: Path) -> None:
    import zstandard

    write(tmp_path, range(TASKS)).finish(1.0)
    dictionary = zstandard.ZstdCompressionDict((tmp_path / DICTIONARY).read_bytes())
    data = (tmp_path / TRACE).read_bytes()
    named = [zstandard.get_frame_parameters(data[start:end]).dict_id for start, end in ranges(tmp_path)]
    assert named == [0] * TRAIN_AFTER + [dictionary.dict_id()] * (TASKS - TRAIN_AFTER)
    again = write(tmp_path, range(TASKS, TASKS + 3))  # a resume compresses against the same dictionary
    again.finish(1.0)
    assert (tmp_path / DICTIONARY).read_bytes() == dictionary.as_bytes()


def test_a_lost_dictionary_costs_the_trace_of_the_tasks_that_need_it_never_their_results(tmp_path: Path) -> None:
    write(tmp_path, range(TASKS)).finish(1.0)
    (tmp_path / DICTIONARY).unlink()
    lost = [entry.task_id for entry, _ in RunReader(tmp_path).tasks() if entry.lost]
    assert lost == [f"t{i}" for i in range(TRAIN_AFTER, TASKS)]
    store = write(tmp_path, range(TASKS, TASKS + 2))  # resumed: the results stand, new tasks are written
    assert store.done == {f"t{i}" for i in range(TASKS)}
    assert any(f"the frames of {TASKS - TRAIN_AFTER} task(s) are lost" in line for line in store.said)
    store.finish(1.0)
    read = {entry.task_id: entry.lost for entry, _ in RunReader(tmp_path).tasks()}
    assert read[f"t{TASKS}"] is False and read[f"t{TASKS + 1}"] is False and read["t0"] is False


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9], ids=["near its start", "in its middle", "near its end"])
def test_one_changed_byte_costs_that_task_s_trace_only(tmp_path: Path, where: float) -> None:
    write(tmp_path, range(TASKS)).finish(1.0)
    start, end = ranges(tmp_path)[TASKS - 5]
    with open(tmp_path / TRACE, "r+b") as f:
        at = start + 4 + int((end - start - 8) * where)  # past the magic number
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x10]))
    lost = [entry.task_id for entry, _ in RunReader(tmp_path).tasks() if entry.lost]
    assert lost == [f"t{TASKS - 5}"]
    again = RunStore.open(tmp_path, manifest())
    assert len(again.done) == TASKS and any("the frames of 1 task(s) are lost" in line for line in again.said)


def test_a_trace_an_older_version_wrote_raw_is_read_and_resumed_raw(tmp_path: Path) -> None:
    with open(tmp_path / TRACE, "wb") as trace, open(tmp_path / RESULTS, "wb") as results:
        for i in range(3):  # the 0.1 writer: frames back to back, every field of the line written
            frames, result = task_frames(i)
            start = trace.tell()
            trace.write(b"".join(frames))
            results.write(result_line(result, start, trace.tell(), None))
    store = write(tmp_path, range(3, 5))
    store.finish(1.0)
    assert not (tmp_path / TRACE).read_bytes().startswith(MAGIC)
    assert [m.task_id for m in iter_frames(trace_bytes(tmp_path)) if isinstance(m, Result)] == [
        f"t{i}" for i in range(5)
    ]


def test_a_line_leaves_out_what_is_at_its_default_and_reads_back_whole(tmp_path: Path) -> None:
    write(tmp_path, range(2)).finish(1.0)
    line = json.loads((tmp_path / RESULTS).read_text().splitlines()[0])
    assert "error" not in line and "cost_usd" not in line["usage"] and line["usage"]["calls"] == 3
    assert "retried_for" not in line and line["passed"] is True
    entry = next(RunReader(tmp_path).entries())
    assert entry.result == task_frames(0)[1]
    full = result_records(tmp_path)[0]
    assert full["error"] is None and full["usage"]["cost_usd"] == 0.0 and full["trace_end"] == line["trace_end"]
    assert msgspec.convert({k: v for k, v in full.items() if not k.startswith("trace_")}, Result) == entry.result
