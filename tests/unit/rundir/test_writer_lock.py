"""One writer per run directory: a second writer is refused naming the holder, in another process or this one; a
lock left by a process that died (SIGKILL, a reused pid) is taken over; one from another host is not."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from redraft.rundir import RunReader, RunStore
from redraft.rundir.lock import LOCK, DirectoryBusy, hold, read_holder, start_ticks, this_process
from tests.support.paths import REPO_ROOT
from tests.unit.rundir.test_damaged_rundir import manifest

HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from redraft.rundir import RunStore
    from tests.unit.rundir.test_damaged_rundir import manifest, write
    store = RunStore.open(Path(sys.argv[1]), manifest())
    write(store, range(2))
    print("held", flush=True)
    sys.stdin.read()  # until the test closes it
    store.finish(1.0)
    """
)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process writing ``tmp_path`` (a run store held open), once it says so."""
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    assert process.stdout is not None and process.stdout.readline() == "held\n"
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


def test_a_second_process_is_refused_naming_the_holder(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    with pytest.raises(DirectoryBusy) as refused:
        RunStore.open(tmp_path, manifest())
    said = str(refused.value)
    assert f"pid {holder.pid} on host {socket.gethostname()} since " in said and "\n" not in said
    assert [entry.task_id for entry in RunReader(tmp_path).entries()] == ["t0", "t1"]  # a reader needs no lock
    assert holder.stdin is not None
    holder.stdin.close()
    assert holder.wait() == 0
    assert not (tmp_path / LOCK).exists()  # released as it finished
    RunStore.open(tmp_path, manifest()).finish(1.0)  # and the next writer goes on


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    left = read_holder(tmp_path / LOCK)
    assert left is not None and left.pid == holder.pid  # the file stays; its flock went with the process
    store = RunStore.open(tmp_path, manifest())
    assert store.done == {"t0", "t1"}
    assert any(f"took over the lock of pid {holder.pid}" in line for line in store.said)
    now = read_holder(tmp_path / LOCK)
    assert now is not None and now.pid == os.getpid()
    store.finish(1.0)


def test_a_second_writer_in_the_same_process_is_refused(tmp_path: Path) -> None:
    store = RunStore.open(tmp_path, manifest())
    with pytest.raises(DirectoryBusy, match=f"pid {os.getpid()} "):
        RunStore.open(tmp_path, manifest())
    store.finish(1.0)


def left_lock(root: Path, **changes: object) -> None:
    """A lock file as a writer would leave it, with ``changes`` to who it names (no process holds its flock)."""
    fields = this_process().__dict__ | changes
    (root / LOCK).write_text(json.dumps(fields))


def test_a_reused_pid_does_not_keep_a_stale_lock(tmp_path: Path) -> None:
    ticks = start_ticks(os.getppid())
    assert ticks is not None  # Linux: /proc tells when a process started
    left_lock(tmp_path, pid=os.getppid(), started=ticks + 1)
    with hold(tmp_path) as lock:  # the pid runs, but it is another process than the one that wrote the lock
        assert lock.took_over is not None and lock.took_over.pid == os.getppid()


def test_a_live_process_named_by_a_lock_it_does_not_flock_is_not_taken_over(tmp_path: Path) -> None:
    """A lock its holder wrote where flocks are not shared with this process (NFS emulation): pid and start match."""
    left_lock(tmp_path, pid=os.getppid(), started=start_ticks(os.getppid()))
    with pytest.raises(DirectoryBusy, match=f"being written by pid {os.getppid()} on host"):
        hold(tmp_path)


def test_a_lock_from_another_host_is_not_taken_over(tmp_path: Path) -> None:
    left_lock(tmp_path, host="node-7", pid=1)
    with pytest.raises(DirectoryBusy) as refused:
        hold(tmp_path)
    assert "pid 1 on host node-7" in str(refused.value)
    assert f"delete {tmp_path / LOCK} and rerun" in str(refused.value)
    (tmp_path / LOCK).unlink()  # as the line says, once that process is known to have stopped
    hold(tmp_path).release()


def test_a_lock_file_its_maker_left_empty_is_taken_over(tmp_path: Path) -> None:
    (tmp_path / LOCK).write_bytes(b"")  # died between making the file and writing who it is
    with hold(tmp_path) as lock:
        now = read_holder(tmp_path / LOCK)
        assert lock.took_over is None and now is not None and now.pid == os.getpid()


def test_a_served_replica_holds_its_day_directory_while_it_writes(tmp_path: Path) -> None:
    from redraft.protocols.messages import Task
    from redraft.serving._journal import Journal
    from tests.unit.rundir.test_damaged_rundir import result

    journal = Journal(tmp_path, lambda name: manifest(), clock=lambda: 86_400.0 * 20_000)
    where = journal.write(Task(task_id="r1", scenario="arithmetic", prompt="?"), [], result(1))
    held = read_holder(tmp_path / where / LOCK)
    assert held is not None and held.pid == os.getpid()
    with pytest.raises(DirectoryBusy):
        RunStore.open(tmp_path / where, manifest())
    journal.close()
    assert not (tmp_path / where / LOCK).exists()
