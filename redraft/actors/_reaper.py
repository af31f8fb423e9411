"""The processes a local Ray leaves when its driver dies, ended at once by a watcher beside the driver.

A driver that starts its own Ray is the parent of Ray's processes (the GCS, the
raylet, the monitors), and the kernel kills those with it. Redraft's actor processes
follow their raylet (`redraft.actors._ray.die_with_raylet`); Ray's other workers
notice within a second or two. Ray's agents (the dashboard agent and the runtime-env
agent, children of the raylet) do not: they see the raylet gone within 2 s, then
send its last log lines to the GCS, which died too, and wait out that call's 60 s
before they exit (Ray 2.60, ``ray/_private/process_watcher.py``). Nothing of the run
is left to end them: this watcher is.

`watch` starts it for the processes a local Ray start made: a Python process that
runs this file alone (standard library only, so it starts in milliseconds). It holds
the read end of a pipe whose write end only the driver holds, and every
`POLL_S` it notes the processes under those roots with their start times. When the
pipe closes (the driver ended, however it ended) it SIGKILLs every process it noted
that still runs with the same start time (a pid the system reused is not touched),
then exits; it exits as well once nothing it watches is left. It reads ``/proc``:
elsewhere than on Linux `watch` starts nothing.

`descendants` and `kill` also serve the driver itself, to end what a failed Ray
start left behind (`redraft.actors._startup`).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterable

POLL_S = 1.0
"""How often the watcher notes the processes under its roots (new workers start while the run goes on)."""

_WATCHERS: list[subprocess.Popen[bytes]] = []
"""The watchers this process started: held, since their pipe closes (and they act) when the handle goes."""


def started_at(pid: int) -> int | None:
    """When ``pid`` started (in clock ticks since boot), or None when it is gone (or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == b"Z" else int(fields[19])


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (none when it is gone)."""
    found: list[int] = []
    try:
        for thread in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{thread}/children", "rb") as listed:
                found += [int(child) for child in listed.read().split()]
    except OSError:
        pass
    return found


def descendants(roots: Iterable[int]) -> dict[int, int]:
    """``roots`` and every process under them that runs, each with its start time."""
    found: dict[int, int] = {}
    todo = list(roots)
    while todo:
        pid = todo.pop()
        start = started_at(pid)
        if start is None or pid in found:
            continue
        found[pid] = start
        todo += children(pid)
    return found


def kill(noted: dict[int, int]) -> None:
    """SIGKILL each noted process that still runs with the start time noted for it."""
    for pid, start in noted.items():
        if started_at(pid) == start:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue


def watch(roots: list[int]) -> None:
    """Start a watcher that ends ``roots`` and everything under them once this process ends (see the module
    docstring); nothing without roots, or off Linux."""
    if not roots or not sys.platform.startswith("linux"):
        return
    watcher = subprocess.Popen(
        [sys.executable, "-I", "-S", __file__, *map(str, roots)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C at the terminal is the driver's to handle, not the watcher's
    )
    _WATCHERS.append(watcher)


def _watch(roots: list[int]) -> None:
    """The watcher's loop: note the processes every `POLL_S` until the driver's pipe closes, then end them."""
    noted = descendants(roots)
    while noted:
        readable, _, _ = select.select([sys.stdin], [], [], POLL_S)
        if readable and not os.read(sys.stdin.fileno(), 1):  # the driver never writes: the pipe closed
            kill(noted | descendants(noted))
            return
        noted = descendants(pid for pid, start in noted.items() if started_at(pid) == start)


if __name__ == "__main__":
    _watch([int(pid) for pid in sys.argv[1:]])
