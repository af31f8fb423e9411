"""The verified prefix (`redraft.rundir._prefix`): a resume verifies again only what the writer did not vouch for,
and finds every damage it found before. Before, every resume decompressed and walked every task's frames."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from redraft.protocols.messages import Task, encode
from redraft.rundir import RunStore, _prefix, _recovery
from redraft.rundir._blocks import DICTIONARY
from redraft.rundir._prefix import VERIFIED
from redraft.rundir.layout import RESULTS, TRACE
from tests.unit.rundir.test_compact_trace import TASKS, manifest, ranges, task_frames, write


@pytest.fixture
def verified(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the tasks whose frames a resume verifies, as it verifies them."""
    seen: list[str] = []
    real = _recovery._verified

    def counting(trace: Any, blocks: Any, entry: Any) -> int | None:
        seen.append(entry.task_id)
        return real(trace, blocks, entry)

    monkeypatch.setattr(_recovery, "_verified", counting)
    return seen


def reopened(root: Path) -> RunStore:
    store = RunStore.open(root, manifest())
    store.close()
    return store


def test_a_resume_of_a_closed_run_verifies_no_frame_again_and_counts_every_task(
    tmp_path: Path, verified: list[str]
) -> None:
    write(tmp_path, range(TASKS)).finish(1.0)
    store = reopened(tmp_path)
    assert verified == []
    assert store.done == {f"t{i}" for i in range(TASKS)} and store.said == []
    assert store.spent.input_tokens == sum(10 + i for i in range(TASKS))


def test_after_a_kill_a_resume_verifies_only_the_tasks_past_the_last_checkpoint(
    tmp_path: Path, verified: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_prefix, "EVERY", 10)
    killed = write(tmp_path, range(25))  # checkpoints after t9 and t19; never closed
    killed._lock.release()  # type: ignore[union-attr]  # the kill took the process, and its lock with it
    store = reopened(tmp_path)
    assert verified == [f"t{i}" for i in range(20, 25)]
    assert len(store.done) == 25


@pytest.mark.parametrize("where", ["trace", "results", "dictionary", "run"])
def test_anything_changed_in_the_prefix_and_the_whole_directory_is_verified_again(
    tmp_path: Path, verified: list[str], where: str
) -> None:
    write(tmp_path, range(TASKS)).finish(1.0)
    if where == "trace":  # one byte of the first task's block: its frames are lost, said as always
        start, end = ranges(tmp_path)[0]
        data = bytearray((tmp_path / TRACE).read_bytes())
        data[(start + end) // 2] ^= 0xFF
        (tmp_path / TRACE).write_bytes(bytes(data))
    elif where == "results":  # a line's bytes changed, its meaning not
        text = (tmp_path / RESULTS).read_text().replace('"task_id":"t3"', '"task_id": "t3"')
        (tmp_path / RESULTS).write_text(text)
    elif where == "dictionary":
        (tmp_path / DICTIONARY).unlink()
    else:
        saved = json.loads((tmp_path / VERIFIED).read_text())
        (tmp_path / VERIFIED).write_text(json.dumps(saved | {"run": "another"}))
    store = reopened(tmp_path)
    assert verified == [f"t{i}" for i in range(TASKS)]
    if where == "trace":
        assert len(store.said) == 1 and "the frames of 1 task(s) are lost" in store.said[0]
    if where == "dictionary":  # the frames after the dictionary name one it no longer is
        assert "the bytes there are not theirs" in store.said[0]
    assert len(store.done) == TASKS


def test_the_resume_after_one_that_recovered_damage_verifies_nothing_again(tmp_path: Path, verified: list[str]) -> None:
    write(tmp_path, range(TASKS)).finish(1.0)
    with open(tmp_path / RESULTS, "ab") as results:
        results.write(b'{"task_id": "torn')  # a writer killed mid-line
    assert len(reopened(tmp_path).said) == 1
    verified.clear()
    store = reopened(tmp_path)
    assert verified == [] and store.said == [] and len(store.done) == TASKS


def test_a_task_whose_frames_a_recovery_would_not_keep_is_never_vouched_for(
    tmp_path: Path, verified: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_prefix, "EVERY", 3)
    store = write(tmp_path, range(3))  # a checkpoint after t2
    stranger = encode(Task(task_id="someone-else", scenario="arithmetic", prompt="?", reference={}))
    frames, result = task_frames(3)
    store.append([stranger, *frames], result)  # names another task: a recovery takes its frames as lost
    store.append(*task_frames(4))
    store.close()
    verified.clear()
    resumed = reopened(tmp_path)
    assert verified == ["t3", "t4"]
    assert "the frames of 1 task(s) are lost" in resumed.said[0]
