"""``tasks.index`` (`redraft.rundir._index`): one task found without reading the run, and the same answer as reading
it, whatever happened to the directory. Before, `redraft trace` read every line of ``results.jsonl`` (twice)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from redraft.errors import UserError
from redraft.protocols.messages import encode
from redraft.rundir import RunReader, RunStore, _results, trace_for
from redraft.rundir._index import ENTRY, INDEX
from redraft.rundir.layout import RESULTS
from tests.unit.rundir.test_compact_trace import manifest, ranges, task_frames, write

TASKS = 40


@pytest.fixture
def unscanned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading ``results.jsonl`` from its first line fails the test: only the index may find a task."""

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("read every record")

    monkeypatch.setattr(_results, "latest_results", refused)
    monkeypatch.setattr("redraft.rundir.reader.latest_results", refused)


def test_a_task_is_found_through_the_index_with_its_frames(tmp_path: Path, unscanned: None) -> None:
    write(tmp_path, range(TASKS)).finish(1.0)
    assert (tmp_path / INDEX).stat().st_size == TASKS * ENTRY
    for i in (0, 17, TASKS - 1):
        entry, frames = trace_for(tmp_path, f"t{i}")
        assert (entry.task_id, entry.result.answer, (entry.start, entry.end)) == (f"t{i}", str(i), ranges(tmp_path)[i])
        assert frames is not None and [f.kind for f in frames] == ["task", "result"]


def test_an_unknown_task_is_said_naming_some_the_run_has(tmp_path: Path) -> None:
    write(tmp_path, range(TASKS)).finish(1.0)
    with pytest.raises(UserError, match=r"no task 'nope'.*e\.g\. t0, t1"):
        trace_for(tmp_path, "nope")


def test_after_a_damaged_line_is_set_aside_the_index_is_made_true_again(tmp_path: Path, unscanned: None) -> None:
    write(tmp_path, range(TASKS)).finish(1.0)
    lines = (tmp_path / RESULTS).read_bytes().splitlines(True)
    lines[3] = b'{"not": "a task"}\n'
    (tmp_path / RESULTS).write_bytes(b"".join(lines))
    store = RunStore.open(tmp_path, manifest())  # the recovery moves line 4 aside: every offset after it moves
    store.append(*task_frames(TASKS))
    store.finish(1.0)
    assert (tmp_path / INDEX).stat().st_size == TASKS * ENTRY
    for i in (4, 20, TASKS):
        entry, frames = trace_for(tmp_path, f"t{i}")
        assert entry.result.answer == str(i) and frames is not None
    with pytest.raises(AssertionError, match="read every record"):  # t3's line is gone: not in the index
        trace_for(tmp_path, "t3")


def test_a_line_the_index_missed_is_found_and_indexed_on_resume(tmp_path: Path, unscanned: None) -> None:
    write(tmp_path, range(TASKS)).finish(1.0)
    with open(tmp_path / INDEX, "r+b") as index:  # the writer was killed between the line and its entry
        index.truncate((TASKS - 2) * ENTRY + 5)
    assert trace_for(tmp_path, f"t{TASKS - 1}")[0].result.answer == str(TASKS - 1)
    RunStore.open(tmp_path, manifest()).close()
    assert (tmp_path / INDEX).stat().st_size == TASKS * ENTRY


def test_an_index_untrue_of_the_file_is_not_believed(tmp_path: Path) -> None:
    write(tmp_path, range(TASKS)).finish(1.0)
    lines = (tmp_path / RESULTS).read_bytes().splitlines(True)
    (tmp_path / RESULTS).write_bytes(b"".join(lines[1:]))  # rewritten by a version that kept no index
    for i in (1, 20, TASKS - 1):
        entry, frames = trace_for(tmp_path, f"t{i}")
        assert entry.result.answer == str(i) and frames is not None
    with pytest.raises(UserError, match="no task 't0'"):
        RunReader(tmp_path).find("t0")


def test_a_task_redone_after_the_machinery_failed_is_found_as_redone(tmp_path: Path, unscanned: None) -> None:
    machinery = "ActorDiedError"
    store = write(tmp_path, range(3))
    frames, done = task_frames(3)
    failed = msgspec.structs.replace(done, error="the actor died", error_type=machinery, stop_reason="error")
    store.append([*frames[:-1], encode(failed)], failed)
    store.close()
    store = RunStore.open(tmp_path, manifest())
    assert "t3" not in store.done
    store.append(frames, done)
    store.finish(1.0)
    entry, found = trace_for(tmp_path, "t3")
    assert entry.result.error is None and entry.start == ranges(tmp_path)[4][0] and found is not None
