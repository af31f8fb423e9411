"""The run directory on its own (no Ray): what a resume keeps, cuts and refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from redraft.actors._attempts import failed_result
from redraft.errors import BackendError, UserError
from redraft.protocols.messages import Result, Task, Usage, encode, iter_frames
from redraft.rundir import RunStore, fingerprint, trace_bytes
from redraft.rundir.layout import RESULTS, TRACE


def manifest(**identity: Any) -> dict[str, Any]:
    identity = {"scenario": "arithmetic", "samples": 1} | identity
    return {"identity": identity, "fingerprint": fingerprint(identity)}


def write(store: RunStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        task = Task(task_id=f"t{i}", scenario="arithmetic", prompt="p" * 200, reference={})
        result = Result(
            task_id=task.task_id,
            scenario="arithmetic",
            answer="1",
            text="Answer: 1",
            score=1.0,
            passed=True,
            initial_score=0.0,
            initial_passed=False,
            rounds=2,
            stop_reason="threshold",
            usage=Usage(input_tokens=10, output_tokens=5, calls=3),
            wall_s=0.1,
        )
        store.append([encode(task), encode(result)], result)


def test_a_result_whose_frames_never_reached_the_trace_stands_with_its_trace_lost(tmp_path: Path) -> None:
    store = RunStore.open(tmp_path, manifest())
    write(store, 3)
    store.finish(1.0)
    # A machine crash (writes are flushed, not fsynced) lost the end of the trace but kept the results.
    ends = [json.loads(line)["trace_end"] for line in (tmp_path / RESULTS).read_text().splitlines()]
    with open(tmp_path / TRACE, "r+b") as f:
        f.truncate(ends[1] + 5)
    again = RunStore.open(tmp_path, manifest())
    assert again.done == {"t0", "t1", "t2"} and again.spent.calls == 9  # t2's result stands
    assert (tmp_path / TRACE).stat().st_size == ends[1]  # its torn frames cut, so new ones follow t1's
    write(again, 1, start=3)
    summary = again.finish(1.0)
    assert summary.tasks == 4 and summary.usage.calls == 12
    results = [m.task_id for m in iter_frames(trace_bytes(tmp_path)) if isinstance(m, Result)]
    assert results == ["t0", "t1", "t3"]


def test_a_torn_last_line_is_cut_and_nothing_is_counted_twice(tmp_path: Path) -> None:
    store = RunStore.open(tmp_path, manifest())
    write(store, 2)
    store.finish(1.0)
    with open(tmp_path / RESULTS, "ab") as f:
        f.write(b'{"task_id": "t2", "sco')  # a writer killed mid-line
    again = RunStore.open(tmp_path, manifest())
    assert again.done == {"t0", "t1"} and again.spent.calls == 6
    assert (tmp_path / RESULTS).read_bytes().endswith(b"}\n")
    assert (tmp_path / f"{RESULTS}.damaged").read_bytes() == b'{"task_id": "t2", "sco'


def test_a_changed_configuration_is_refused_showing_each_change_whole(tmp_path: Path) -> None:
    server = "openai-compatible:fake@http://127.0.0.1:{}/v1?rpm=600&tpm=1000000"  # longer than any cut
    RunStore.open(tmp_path, manifest(drafter=server.format(8001), prompts={"critique": 1, "draft": 1})).finish(0.0)
    with pytest.raises(UserError) as refused:
        RunStore.open(tmp_path, manifest(drafter=server.format(8002), prompts={"critique": 2, "draft": 1}, samples=2))
    assert str(refused.value).splitlines() == [
        f"{tmp_path} holds a run with another configuration; rerun with the same settings to resume it, "
        "or use another --out. What differs (the run's -> this one's):",
        f'  drafter: "{server.format(8001)}" -> "{server.format(8002)}"',
        "  prompts.critique: 1 -> 2",
        "  samples: 1 -> 2",
    ]


def test_a_changed_fingerprint_of_the_same_settings_is_refused_saying_so(tmp_path: Path) -> None:
    RunStore.open(tmp_path, manifest()).finish(0.0)
    same_settings = manifest() | {"fingerprint": "0" * 16}  # another version's hash of the same settings
    with pytest.raises(UserError, match=r"the settings read the same, but their fingerprints differ \(.* vs 0{16}\)"):
        RunStore.open(tmp_path, same_settings)


def test_the_store_keeps_nothing_per_task_written_now(tmp_path: Path) -> None:
    store = RunStore.open(tmp_path, manifest())
    write(store, 50)
    failed = failed_result(Task(task_id="x", scenario="s", prompt="", reference={}), BackendError("gone"))
    store.append([encode(failed)], failed)
    # Only earlier invocations' ids are remembered (to skip them): memory does not grow with the run.
    assert store.done == set() and store.spent.calls == 150
    summary = store.finish(1.0)
    assert summary.tasks == 51 and summary.errors == {"BackendError": 1}
