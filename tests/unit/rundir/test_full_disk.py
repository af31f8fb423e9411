"""A directory that stops taking writes: one `RunDirWriteError` line naming it and how to resume, nothing more
written, nothing recorded lost, and the same directory resumed once it takes writes again."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import IO

import pytest

from redraft.errors import RunDirWriteError
from redraft.rundir import RunReader, RunStore
from tests.support.disks import remount, small_disk
from tests.unit.rundir.test_damaged_rundir import manifest, write

TASKS = 40


def filled(root: Path) -> tuple[RunStore, int, RunDirWriteError]:
    """A store written until its disk refuses: the store, the tasks written whole, the error."""
    store = RunStore.open(root, manifest())
    for i in range(TASKS):
        try:
            write(store, range(i, i + 1))
        except RunDirWriteError as stopped:
            return store, i, stopped
    raise AssertionError("the disk never filled")


def test_a_full_disk_is_one_line_and_the_run_resumes_with_every_task_once(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "24k") as disk:
        root = disk / "run"
        store, written, stopped = filled(root)
        said = str(stopped)
        assert said.startswith(f"cannot write in the run directory {root} (No space left on device)")
        assert "\n" not in said
        assert "rerun the same command to resume" in said
        with pytest.raises(RunDirWriteError):  # nothing more is written once a write failed
            write(store, range(written + 1, written + 2))
        store.finish(1.0)  # says nothing more: the run ends on the one line above
        remount(disk, "size=4m")
        resumed = RunStore.open(root, manifest())
        assert resumed.done == {f"t{i}" for i in range(written)}  # every task written whole is kept
        write(resumed, range(written, TASKS))
        resumed.finish(2.0)
        entries = list(RunReader(root).entries())
        assert sorted(e.task_id for e in entries) == sorted(f"t{i}" for i in range(TASKS))
        assert all(not e.lost for e in entries)  # each task's frames whole


class Refusing:
    """A file whose writes fail with ``error`` (a full disk, a read-only filesystem), as the kernel would say."""

    def __init__(self, inner: IO[bytes], error: int) -> None:
        self.inner, self.error = inner, error

    def write(self, data: bytes) -> int:
        raise OSError(self.error, "injected")

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EROFS, errno.EDQUOT])
def test_a_write_refused_at_the_writer_s_call_is_the_same_one_line(tmp_path: Path, error: int) -> None:
    """Where no filesystem can be mounted: the failure injected at the writer's own write."""
    store = RunStore.open(tmp_path, manifest())
    write(store, range(3))
    store._results = Refusing(store._results, error)  # type: ignore[arg-type, assignment]
    with pytest.raises(RunDirWriteError, match=r"3 task\(s\) are recorded there") as stopped:
        write(store, range(3, 4))
    assert "\n" not in str(stopped.value) and stopped.value.__cause__ is None
    store.finish(1.0)
    resumed = RunStore.open(tmp_path, manifest())
    assert resumed.done == {"t0", "t1", "t2"}  # the task whose line failed is redone, its frames cut
    write(resumed, range(3, 5))
    resumed.finish(1.0)
    assert [e.task_id for e in RunReader(tmp_path).entries()] == ["t0", "t1", "t2", "t3", "t4"]
