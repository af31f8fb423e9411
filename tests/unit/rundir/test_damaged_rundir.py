"""A damaged run directory is recovered record by record (no Ray): each kind of damage to ``results.jsonl`` and
``trace.msgpack`` costs exactly what it damaged, the damaged bytes are moved beside the file, one line says so,
and the next appends leave a directory every reader reads whole. The same on Ray, resumed by the real command:
tests/integration/test_resume_damaged.py."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from redraft.protocols.messages import Draft, Result, Task, Usage, encode
from redraft.rundir import GenericFrame, RunReader, RunStore, fingerprint
from redraft.rundir.layout import RESULTS, TRACE
from redraft.views._fields import TRACE_LOST
from redraft.views.export import export
from redraft.views.report import write_report
from redraft.views.trace import show_trace

TASKS = 20
DAMAGED_RESULTS, DAMAGED_TRACE = f"{RESULTS}.damaged", f"{TRACE}.damaged"


def manifest() -> dict[str, Any]:
    identity = {"scenario": "arithmetic", "samples": 1}
    return {"identity": identity, "fingerprint": fingerprint(identity), "started_at": "2026-11-26T10:00:00Z"}


def result(i: int) -> Result:
    return Result(
        task_id=f"t{i}",
        scenario="arithmetic",
        answer=str(i),
        text=f"Answer: {i}",
        score=1.0,
        passed=True,
        initial_score=0.0,
        initial_passed=False,
        rounds=2,
        stop_reason="threshold",
        usage=Usage(input_tokens=10, output_tokens=5, calls=3),
        wall_s=0.1,
    )


def write(store: RunStore, ids: range, prompt: str = "p") -> None:
    for i in ids:
        task = Task(task_id=f"t{i}", scenario="arithmetic", prompt=prompt * (50 + i), reference={})
        draft = Draft(task_id=f"t{i}", round=0, sample=0, text=f"Answer: {i}")
        store.append([encode(task), encode(draft), encode(result(i))], result(i))


def made(root: Path, prompt: str = "p", *, raw: bool = False) -> RunStore:
    """A finished run of `TASKS` tasks at ``root`` (``raw``: its trace written as redraft 0.1 wrote it, the frames
    uncompressed, so that a test can damage the bytes of one field)."""
    store = RunStore.open(root, manifest())
    if raw:
        store._blocks = None  # the writer of a trace that began raw
    write(store, range(TASKS), prompt)
    store.finish(1.0)
    return store


def lines(root: Path) -> list[bytes]:
    return (root / RESULTS).read_bytes().splitlines(keepends=True)


def ranges(root: Path) -> list[tuple[int, int]]:
    return [(r["trace_start"], r["trace_end"]) for r in map(json.loads, lines(root))]


def whole(root: Path, ids: list[str], lost: set[str] | None = None) -> None:
    """``root`` holds exactly ``ids``' records, in that order, each once; every one's frames read back (its `Result`
    last) but those in ``lost``; no two ranges overlap."""
    read = list(RunReader(root).tasks())
    assert [entry.task_id for entry, _ in read] == ids
    assert {entry.task_id for entry, frames in read if entry.lost} == (lost or set())
    for entry, frames in read:
        if not entry.lost:
            assert frames and frames[-1].kind == "result" and frames[-1].message.task_id == entry.task_id
    spans = sorted((entry.start, entry.end) for entry, _ in read if not entry.lost)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def ids(*numbers: int) -> list[str]:
    return [f"t{i}" for i in numbers]


EVERY = list(range(TASKS))

# ---------------------------------------------------------------- results.jsonl


def test_a_corrupt_middle_line_costs_that_task_only_and_the_sixteen_after_it_stay(tmp_path: Path) -> None:
    made(tmp_path)
    before = lines(tmp_path)
    spoilt = b'{"task_id": "t3", "sc\x00re": \n'
    (tmp_path / RESULTS).write_bytes(b"".join([*before[:3], spoilt, *before[4:]]))
    assert [e.task_id for e in RunReader(tmp_path).entries()] == ids(*EVERY[:3], *EVERY[4:])  # a reader skips it
    store = RunStore.open(tmp_path, manifest())
    offset = sum(map(len, before[:3]))
    assert store.said == [
        f"results.jsonl: kept 19, set aside 1 line: line 4 (byte {offset}) unreadable (moved to results.jsonl.damaged)"
    ]
    assert store.done == set(ids(*EVERY)) - {"t3"} and store.spent.calls == 3 * 19
    assert (tmp_path / DAMAGED_RESULTS).read_bytes() == spoilt
    write(store, range(3, 4))  # the resume redoes t3 alone
    store.finish(1.0)
    whole(tmp_path, ids(*EVERY[:3], *EVERY[4:], 3))
    assert RunStore.open(tmp_path, manifest()).said == []  # recovered once: nothing more to say


@pytest.mark.parametrize(
    ("spoil", "detail"),
    [
        (lambda r: {k: v for k, v in r.items() if k != "passed"}, "Object missing required field `passed`"),
        (lambda r: r | {"score": "high"}, "Expected `float`, got `str` - at `$.score`"),
        (lambda r: r | {"trace_end": "far"}, "`trace_end` is not an offset"),
        (lambda r: [r], "a task's line is a JSON object"),
    ],
    ids=["a field missing", "a field of the wrong type", "an offset that is not one", "not an object"],
)
def test_a_line_of_the_wrong_shape_is_refused_naming_it_and_never_raises(
    tmp_path: Path, spoil: Any, detail: str
) -> None:
    made(tmp_path)
    before = lines(tmp_path)
    spoilt = json.dumps(spoil(json.loads(before[7]))).encode() + b"\n"
    (tmp_path / RESULTS).write_bytes(b"".join([*before[:7], spoilt, *before[8:]]))
    store = RunStore.open(tmp_path, manifest())
    offset = sum(map(len, before[:7]))
    assert store.said == [
        f"results.jsonl: kept 19, set aside 1 line: line 8 (byte {offset}) wrong shape: {detail} "
        "(moved to results.jsonl.damaged)"
    ]
    assert (tmp_path / DAMAGED_RESULTS).read_bytes() == spoilt and "t7" not in store.done


def test_a_torn_last_line_is_set_aside_with_the_frames_it_would_have_pointed_at(tmp_path: Path) -> None:
    made(tmp_path)
    before, trace = lines(tmp_path), (tmp_path / TRACE).read_bytes()
    torn = before[-1][:40]
    (tmp_path / RESULTS).write_bytes(b"".join(before[:-1]) + torn)
    store = RunStore.open(tmp_path, manifest())
    start = json.loads(before[-1])["trace_start"]
    assert store.said == [
        f"results.jsonl: kept 19, set aside 1 line: line 20 (byte {sum(map(len, before[:-1]))}) torn "
        "(moved to results.jsonl.damaged)",
        f"trace.msgpack: the frames past the last record kept; {len(trace) - start} bytes set aside in "
        "trace.msgpack.damaged",
    ]
    assert (tmp_path / DAMAGED_RESULTS).read_bytes() == torn
    assert (tmp_path / DAMAGED_TRACE).read_bytes() == trace[start:]
    write(store, range(19, 20))
    store.finish(1.0)
    whole(tmp_path, ids(*EVERY))


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_lost_results_are_redone_and_the_trace_they_leave_behind_is_moved_aside(tmp_path: Path, how: str) -> None:
    made(tmp_path)
    trace = (tmp_path / TRACE).read_bytes()
    if how == "deleted":
        (tmp_path / RESULTS).unlink()
    else:
        (tmp_path / RESULTS).write_bytes(b"")
    store = RunStore.open(tmp_path, manifest())
    assert store.done == set() and store.said == [
        f"trace.msgpack: the frames of {TASKS} tasks past the last record (their results are not in results.jsonl); "
        f"{len(trace)} bytes set aside in trace.msgpack.damaged"
    ]
    assert (tmp_path / DAMAGED_TRACE).read_bytes() == trace and (tmp_path / TRACE).stat().st_size == 0
    write(store, range(TASKS))
    store.finish(1.0)
    whole(tmp_path, ids(*EVERY))


def test_a_results_file_from_another_run_is_set_aside_whole_and_not_mixed_in(tmp_path: Path) -> None:
    made(tmp_path / "other", prompt="q")
    made(tmp_path / "run")
    foreign = (tmp_path / "other" / RESULTS).read_bytes()
    (tmp_path / "run" / RESULTS).write_bytes(foreign)
    theirs = json.loads(foreign.splitlines()[0])["run"]
    mine = json.loads((tmp_path / "run" / "manifest.json").read_text())["run_uid"]
    store = RunStore.open(tmp_path / "run", manifest())
    assert store.done == set()
    assert store.said[0].startswith(
        f"results.jsonl: kept 0, set aside 20 lines: line 1 (byte 0) another run: run {theirs}, "
        f"not this directory's {mine}; line 2"
    )
    assert store.said[1].startswith("trace.msgpack: the frames of 20 tasks past the last record")
    assert (tmp_path / "run" / DAMAGED_RESULTS).read_bytes() == foreign


def test_one_line_from_another_run_costs_that_line(tmp_path: Path) -> None:
    made(tmp_path / "other", prompt="q")
    made(tmp_path / "run")
    stray = lines(tmp_path / "other")[5]
    with open(tmp_path / "run" / RESULTS, "ab") as f:
        f.write(stray)
    store = RunStore.open(tmp_path / "run", manifest())
    assert store.done == set(ids(*EVERY)) and len(store.said) == 1 and "another run" in store.said[0]
    assert (tmp_path / "run" / DAMAGED_RESULTS).read_bytes() == stray
    whole(tmp_path / "run", ids(*EVERY))


# ---------------------------------------------------------------- trace.msgpack


@pytest.mark.parametrize(
    ("how", "why"), [("deleted", "the trace is missing"), ("emptied", "the trace ends before them")]
)
def test_a_lost_trace_costs_the_trace_not_the_results(tmp_path: Path, how: str, why: str) -> None:
    made(tmp_path)
    if how == "deleted":
        (tmp_path / TRACE).unlink()
    else:
        (tmp_path / TRACE).write_bytes(b"")
    store = RunStore.open(tmp_path, manifest())
    assert store.done == set(ids(*EVERY)) and store.spent.calls == 3 * TASKS
    assert store.said == [
        f"trace.msgpack: the frames of 20 task(s) are lost ({why}: 20); their results stand "
        "(--redo-untraced redoes them)"
    ]
    assert [json.loads(line).get("trace_lost") for line in lines(tmp_path)] == [True] * TASKS
    write(store, range(TASKS, TASKS + 1))
    store.finish(1.0)
    whole(tmp_path, ids(*EVERY, TASKS), lost=set(ids(*EVERY)))
    assert ranges(tmp_path)[-1][0] == 0  # the new frames begin the new trace: no range overlaps it
    assert RunStore.open(tmp_path, manifest()).said == []  # said once


def test_a_trace_cut_mid_task_loses_that_tasks_frames_only(tmp_path: Path) -> None:
    made(tmp_path)
    trace = (tmp_path / TRACE).read_bytes()
    start, end = ranges(tmp_path)[-1]
    cut = (start + end) // 2
    (tmp_path / TRACE).write_bytes(trace[:cut])
    store = RunStore.open(tmp_path, manifest())
    assert store.said == [
        "trace.msgpack: the frames of 1 task(s) are lost (the trace ends before them: 1); their results stand "
        f"(--redo-untraced redoes them); {cut - start} bytes set aside in trace.msgpack.damaged"
    ]
    assert (tmp_path / DAMAGED_TRACE).read_bytes() == trace[start:cut]
    write(store, range(TASKS, TASKS + 1))
    store.finish(1.0)
    whole(tmp_path, ids(*EVERY, TASKS), lost={"t19"})


@pytest.mark.parametrize(
    "spoil",
    [lambda n: b"\xc1" * n, lambda n: b"\x91" * (n - 1) + b"\xc0"],
    ids=["a byte MessagePack never uses", "arrays nested as deep as the range"],
)
def test_corrupt_frames_in_the_middle_cost_that_tasks_trace_and_stay_in_place(tmp_path: Path, spoil: Any) -> None:
    made(tmp_path)
    start, end = ranges(tmp_path)[3]
    garbage = spoil(end - start)
    with open(tmp_path / TRACE, "r+b") as f:
        f.seek(start)
        f.write(garbage)
    reader = RunReader(tmp_path)
    assert [e.task_id for e, frames in reader.tasks() if e.lost] == ["t3"]  # a reader checks what it reads
    store = RunStore.open(tmp_path, manifest())
    assert store.said == [
        "trace.msgpack: the frames of 1 task(s) are lost (the bytes there are not theirs: 1); their results "
        f"stand (--redo-untraced redoes them); {end - start} bytes set aside in trace.msgpack.damaged"
    ]
    assert (tmp_path / DAMAGED_TRACE).read_bytes() == garbage
    write(store, range(TASKS, TASKS + 1))
    store.finish(1.0)
    whole(tmp_path, ids(*EVERY, TASKS), lost={"t3"})


def test_a_garbage_trace_is_moved_aside_and_every_reader_still_reads_the_run(tmp_path: Path) -> None:
    made(tmp_path)
    (tmp_path / TRACE).write_bytes(b"not a trace!")
    # Before any resume: the readers read every result, and say a trace is lost rather than that nothing finished.
    buffer = io.StringIO()
    show_trace(tmp_path, "t5", Console(file=buffer, width=300))
    assert (
        TRACE_LOST in buffer.getvalue()
        and "(the loop's verdict): pass · score 0.000 → 1.000 · 2 rounds" in buffer.getvalue()
    )
    assert export(tmp_path, "csv")[1] == TASKS
    write_report(tmp_path)
    pages = list((tmp_path / "report").glob("t5-*.html"))
    assert len(pages) == 1 and TRACE_LOST in pages[0].read_text()
    store = RunStore.open(tmp_path, manifest())
    assert store.done == set(ids(*EVERY))
    assert store.said == [
        "trace.msgpack: the frames of 20 task(s) are lost (the trace ends before them: 20); their results stand "
        "(--redo-untraced redoes them); 12 bytes set aside in trace.msgpack.damaged"
    ]
    assert (tmp_path / DAMAGED_TRACE).read_bytes() == b"not a trace!" and (tmp_path / TRACE).stat().st_size == 0
    write(store, range(TASKS, TASKS + 2))
    store.finish(1.0)
    whole(tmp_path, ids(*EVERY, TASKS, TASKS + 1), lost=set(ids(*EVERY)))


def test_a_trace_from_another_run_is_never_read_as_this_ones(tmp_path: Path) -> None:
    made(tmp_path / "other", prompt="qq")
    made(tmp_path / "run")
    foreign = (tmp_path / "other" / TRACE).read_bytes()
    assert len(foreign) > (tmp_path / "run" / TRACE).stat().st_size
    (tmp_path / "run" / TRACE).write_bytes(foreign)
    assert not [e for e, frames in RunReader(tmp_path / "run").tasks() if not e.lost]
    store = RunStore.open(tmp_path / "run", manifest())
    assert store.done == set(ids(*EVERY)) and store.said[0].startswith(
        "trace.msgpack: the frames of 20 task(s) are lost (the bytes there are not theirs: 20)"
    )
    assert (tmp_path / "run" / DAMAGED_TRACE).read_bytes() == foreign


def test_redo_untraced_redoes_the_tasks_whose_frames_are_lost_once_each(tmp_path: Path) -> None:
    made(tmp_path)
    before = lines(tmp_path)
    start, _ = ranges(tmp_path)[15]
    with open(tmp_path / TRACE, "r+b") as f:
        f.truncate(start)
    store = RunStore.open(tmp_path, manifest(), redo_untraced=True)
    assert store.done == set(ids(*EVERY[:15]))
    assert store.said[0].startswith(
        "trace.msgpack: the frames of 5 task(s) are lost (the trace ends before them: 5); their lines moved to "
        "results.jsonl.damaged, and the tasks redone (--redo-untraced)"
    )
    assert (tmp_path / DAMAGED_RESULTS).read_bytes() == b"".join(before[15:])
    write(store, range(15, TASKS))
    store.finish(1.0)
    whole(tmp_path, ids(*EVERY))


def test_redo_untraced_later_redoes_the_tasks_an_earlier_resume_found_untraced(tmp_path: Path) -> None:
    made(tmp_path)
    (tmp_path / TRACE).unlink()
    RunStore.open(tmp_path, manifest()).finish(0.0)  # their results stood
    store = RunStore.open(tmp_path, manifest(), redo_untraced=True)
    assert store.done == set() and "marked lost before" in store.said[0]
    write(store, range(TASKS))
    store.finish(1.0)
    whole(tmp_path, ids(*EVERY))


def test_a_deleted_manifest_keeps_the_records_it_finds(tmp_path: Path) -> None:
    made(tmp_path)
    (tmp_path / "manifest.json").unlink()
    store = RunStore.open(tmp_path, manifest())
    assert store.done == set(ids(*EVERY)) and store.said == []
    assert json.loads((tmp_path / "manifest.json").read_text())["run_uid"] == json.loads(lines(tmp_path)[0])["run"]


def test_an_undamaged_directory_is_left_byte_for_byte_as_it_was(tmp_path: Path) -> None:
    made(tmp_path)
    before = {name: (tmp_path / name).read_bytes() for name in (RESULTS, TRACE)}
    store = RunStore.open(tmp_path, manifest())
    assert store.said == [] and store.done == set(ids(*EVERY))
    assert {name: (tmp_path / name).read_bytes() for name in (RESULTS, TRACE)} == before
    assert not list(tmp_path.glob("*.damaged"))


# ---------------------------------------------- text damaged out of UTF-8 (found by test_store_machine.py)


def test_a_task_id_in_the_trace_no_longer_utf8_costs_that_tasks_trace_and_the_resume_goes_on(tmp_path: Path) -> None:
    made(tmp_path, raw=True)
    start, end = ranges(tmp_path)[5]
    trace = bytearray((tmp_path / TRACE).read_bytes())
    trace[trace.index(b"t5", start)] = 0xFF  # one byte of the Task frame's id
    (tmp_path / TRACE).write_bytes(bytes(trace))
    assert [e.task_id for e, frames in RunReader(tmp_path).tasks() if e.lost] == ["t5"]
    store = RunStore.open(tmp_path, manifest())
    assert store.done == set(ids(*EVERY)) and store.said == [
        "trace.msgpack: the frames of 1 task(s) are lost (the bytes there are not theirs: 1); their results "
        f"stand (--redo-untraced redoes them); {end - start} bytes set aside in trace.msgpack.damaged"
    ]
    assert (tmp_path / DAMAGED_TRACE).read_bytes() == bytes(trace[start:end])
    write(store, range(TASKS, TASKS + 1))
    store.finish(1.0)
    whole(tmp_path, ids(*EVERY, TASKS), lost={"t5"})


def test_a_prompt_in_the_trace_no_longer_utf8_reads_as_a_generic_frame_with_the_damage_replaced(
    tmp_path: Path,
) -> None:
    made(tmp_path, raw=True)
    start, _ = ranges(tmp_path)[5]
    trace = bytearray((tmp_path / TRACE).read_bytes())
    trace[trace.index(b"ppp", start) + 1] = 0xFF
    (tmp_path / TRACE).write_bytes(bytes(trace))
    read = {entry.task_id: frames for entry, frames in RunReader(tmp_path).tasks()}
    task = read["t5"][0]
    assert isinstance(task, GenericFrame) and task.kind == "task" and task.fields["prompt"][:3] == "p\ufffdp"
    assert [frame.kind for frame in read["t5"]] == ["task", "draft", "result"]
    assert RunStore.open(tmp_path, manifest()).said == []  # the frames are whole, their task named: nothing lost
    whole(tmp_path, ids(*EVERY))


def test_a_field_name_in_the_trace_no_longer_utf8_never_stops_a_reader(tmp_path: Path) -> None:
    made(tmp_path, raw=True)
    start, end = ranges(tmp_path)[5]
    trace = bytearray((tmp_path / TRACE).read_bytes())
    key = trace.index(b"\xadedits_applied", start, end)  # a field of the Result with a default
    trace[key + 1] = 0xFF
    (tmp_path / TRACE).write_bytes(bytes(trace))
    read = {entry.task_id: frames for entry, frames in RunReader(tmp_path).tasks()}
    assert [frame.kind for frame in read["t5"]] == ["task", "draft", "result"]
    assert RunStore.open(tmp_path, manifest()).said == []  # whole frames naming their task: nothing lost


def test_lost_results_over_a_raw_trace_with_a_prompt_no_longer_utf8_set_its_tasks_frames_aside(tmp_path: Path) -> None:
    """Found by the run store's state machine: the count of whole tasks past the last record stopped at text
    damaged out of UTF-8, so the frames of every task there were dropped instead of set aside."""
    made(tmp_path, raw=True)
    (tmp_path / RESULTS).write_bytes(b"")
    trace = bytearray((tmp_path / TRACE).read_bytes())
    trace[trace.index(b"ppp") + 1] = 0xFF  # t0's prompt
    (tmp_path / TRACE).write_bytes(bytes(trace))
    store = RunStore.open(tmp_path, manifest())
    assert store.done == set() and store.said == [
        f"trace.msgpack: the frames of {TASKS} tasks past the last record (their results are not in results.jsonl); "
        f"{len(trace)} bytes set aside in trace.msgpack.damaged"
    ]
    assert (tmp_path / DAMAGED_TRACE).read_bytes() == bytes(trace)
