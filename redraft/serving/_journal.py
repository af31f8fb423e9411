"""Where a replica writes its requests' traces: a run directory of its own per day, which `redraft report` and
`redraft trace` read like any run's.

A run directory has one writer (`redraft.rundir.RunStore`). Replicas of a server run side by side, on one node
or many, so each replica writes its own directory, ``OUT/DAY/REPLICA`` (DAY in UTC, REPLICA the time it started
and a random suffix): two writers never share a file, and a replica restarted is a new writer in a new
directory. At midnight UTC a replica finishes its directory (``summary.json``) and opens the next day's.
Each request is one task: the task (the request's messages as its prompt) then its loop's messages.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from redraft.protocols.messages import Message, Result, Task, encode
from redraft.rundir import RunReader, RunStore

DEFAULT_OUT = Path("runs") / "serve"


class Journal:
    """One replica's run directories (see the module docstring); thread-safe."""

    def __init__(
        self, root: Path | None, manifest: Callable[[str], dict[str, Any]], *, clock: Callable[[], float] = time.time
    ) -> None:
        self.root = root or DEFAULT_OUT
        self.replica = time.strftime("%H%M%S-", time.gmtime(clock())) + uuid.uuid4().hex[:6]
        self._manifest, self._clock = manifest, clock
        self._store: RunStore | None = None
        self._day = ""
        self._opened_at = 0.0
        self._lock = threading.Lock()

    def write(self, task: Task, trace: list[Message], result: Result) -> str:
        """Append one request's trace; the run directory's name under the root (``DAY/REPLICA``)."""
        with self._lock:
            store = self._today()
            store.append([encode(task), *(encode(m) for m in trace)], result)
            return f"{self._day}/{self.replica}"

    def close(self) -> None:
        """Finish the open directory (its ``summary.json``)."""
        with self._lock:
            self._finish()

    def _today(self) -> RunStore:
        day = time.strftime("%Y-%m-%d", time.gmtime(self._clock()))
        if self._store is None or day != self._day:
            self._finish()
            self._day, self._opened_at = day, self._clock()
            name = f"{day}/{self.replica}"
            self._store = RunStore.open(self.root / day / self.replica, self._manifest(name))
        return self._store

    def _finish(self) -> None:
        if self._store is not None:
            self._store.finish(self._clock() - self._opened_at)
            self._store = None


def served_since(root: Path | None, since: float) -> str:
    """One line of what the server's replicas recorded under ``root`` since ``since`` (a `time.time`): the
    requests whose loops ran, their model calls and cost, and where their traces are."""
    root = root or DEFAULT_OUT
    requests = calls = 0
    usd = 0.0
    runs: list[Path] = []
    for run in sorted(root.glob("*/*/manifest.json")):
        if run.stat().st_mtime < since:
            continue
        runs.append(run.parent)
        for result in RunReader(run.parent).finished():
            requests, calls, usd = requests + 1, calls + result.usage.calls, usd + result.usage.cost_usd
    where = str(runs[0]) if len(runs) == 1 else f"{len(runs)} run directories under {root}" if runs else str(root)
    noun = "request" if requests == 1 else "requests"
    return f"{requests} {noun} refined ({calls} model calls, {usd:.4f} USD); traces in {where}"
