"""One writer per directory: a run's (and a comparison's, a tune's, a judge card's, a served replica's day)
directory is held by one process for as long as it writes there; a second writer is refused in one line that
names the holder.

The lock is two things at once, ``writer.lock`` in the directory:

- a file made with ``O_CREAT | O_EXCL``, holding who wrote it (host, pid, the process's start time and the
  machine's boot id, since when, the command): atomic on a local filesystem and on NFS v3 and later, so of
  two processes that make it at once exactly one succeeds, on one machine or on two;
- a ``flock`` held on that file while the writer lives: the kernel drops it when the process dies, however it
  dies (SIGKILL included). On NFS, Linux emulates ``flock`` with POSIX byte-range locks, which the server
  keeps for every client (NLM for v3, in the protocol for v4; the lock of a client that vanished is released
  when its lease ends).

A process that finds the file and gets the ``flock`` takes the lock over only from a holder on this host that is
gone; one on another host is refused.

Readers (`redraft.rundir.RunReader`, report, trace, export, a viewer) never take it. Releasing unlinks the
file before dropping the ``flock``; a process that opened the old file checks, once locked, that the path
still names the file it holds, and starts over otherwise.

See docs/architecture.md, section "Taking over a writer's lock".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from redraft.errors import UserError

LOCK = "writer.lock"
"""The lock's file name in the directory it guards."""


class DirectoryBusy(UserError):
    """The directory has a live writer (or one this host cannot tell is gone): another process's, or this one's."""


@dataclass(frozen=True)
class Holder:
    """Who holds a directory: what the lock file says."""

    host: str
    pid: int
    started: int | None
    """The process's start time, in clock ticks since boot (``/proc/PID/stat``): tells a reused pid apart."""
    boot: str
    """The machine's boot id: a pid of an earlier boot is no process of this one."""
    since: str
    """When it took the lock (UTC, ISO 8601)."""
    command: str

    def said(self) -> str:
        return f"pid {self.pid} on host {self.host} since {self.since}" + (f" ({self.command})" if self.command else "")


def this_process() -> Holder:
    pid = os.getpid()
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    command = " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:2]]) if sys.argv and sys.argv[0] else ""
    return Holder(socket.gethostname(), pid, start_ticks(pid), _boot_id(), since, command)


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None where ``/proc`` cannot say (not Linux, gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return int(fields[19])  # field 22 of proc(5), counted from field 3 here


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def gone(holder: Holder, here: Holder) -> bool | None:
    """Whether ``holder``'s process has ended: True, False, or None when this host cannot tell (another host)."""
    if holder.host != here.host:
        return None
    if holder.boot and here.boot and holder.boot != here.boot:
        return True  # the machine rebooted since
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, another user's
    return holder.started is not None and start_ticks(holder.pid) not in (None, holder.started)


@dataclass
class WriterLock:
    """A directory held for writing; `release` (or the process's end) gives it up."""

    path: Path
    fd: int
    took_over: Holder | None
    """The holder whose stale lock this one took over (its process had ended), if any."""
    made: bool = False
    """Whether holding it made the directory: released empty (a command refused), it is removed again."""

    def release(self) -> None:
        if self.fd < 0:
            return
        try:
            if os.stat(self.path).st_ino == os.fstat(self.fd).st_ino:
                os.unlink(self.path)
        except OSError:
            pass  # gone already, or a read-only directory now: the flock below is what guards
        os.close(self.fd)
        self.fd = -1
        _unmade(self.path.parent, self.made)

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


def hold(root: Path, what: str = "--out") -> WriterLock:
    """Hold ``root`` (made if missing) for writing; `DirectoryBusy` (one line, naming the holder) if another
    writer holds it. ``what`` names the directory in that line (``--out``, the option that gave it)."""
    made = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK
    here = this_process()
    for _ in range(100):  # each turn ends with the lock, a refusal, or a file released meanwhile (rare)
        took: Holder | None = None
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                continue  # released between the two opens
        try:
            _locked_or_refused(fd, path, what)
            if not _still_there(fd, path):
                os.close(fd)
                continue
            if os.fstat(fd).st_size:  # not made just now: whose is it, and is that one gone?
                took = _stale_or_refused(_read(fd), here, path, what)
            _write(fd, here)
        except BaseException:
            os.close(fd)
            _unmade(root, made)
            raise
        return WriterLock(path, fd, took, made)
    raise DirectoryBusy(f"{what} {root}: its lock file kept changing hands; try again")


def _unmade(root: Path, made: bool) -> None:
    """A directory holding made, left as it was found: removed when nothing was written in it."""
    if made:
        with contextlib.suppress(OSError):  # something was written: it stays
            root.rmdir()


def _locked_or_refused(fd: int, path: Path, what: str) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        holder = read_holder(path)
        who = holder.said() if holder is not None else "another process"
        raise DirectoryBusy(
            f"{what} {path.parent} is being written by {who}: one writer per directory; wait for it to end, "
            "or use another directory"
        ) from None


def _stale_or_refused(holder: Holder | None, here: Holder, path: Path, what: str) -> Holder | None:
    """The stale holder taken over (None for a file with no holder: its maker died making it), or a refusal."""
    if holder is None:
        return None
    ended = gone(holder, here)
    if ended:
        return holder
    if ended is None:
        raise DirectoryBusy(
            f"{what} {path.parent} is held by {holder.said()}, and this host cannot tell whether that process "
            f"still runs: once it has stopped, delete {path} and rerun"
        )
    raise DirectoryBusy(f"{what} {path.parent} is being written by {holder.said()}: one writer per directory")


def _still_there(fd: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _write(fd: int, holder: Holder) -> None:
    data = json.dumps(holder.__dict__, sort_keys=True).encode() + b"\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)  # another host reads it from the server, not from this one's cache


def _read(fd: int) -> Holder | None:
    return _holder(os.pread(fd, 4096, 0))


def read_holder(path: Path) -> Holder | None:
    """What ``path`` says of its holder, or None (missing, empty: its maker died between making and writing)."""
    try:
        return _holder(path.read_bytes())
    except OSError:
        return None


def _holder(data: bytes) -> Holder | None:
    try:
        fields = json.loads(data)
        return Holder(**fields) if isinstance(fields, dict) else None
    except (ValueError, TypeError):
        return None
