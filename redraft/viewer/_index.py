"""A run's tasks as the viewer filters them: one small row per task, kept in memory, rebuilt when the run grows.

The rows come from the run's records (`redraft.rundir.RunReader.entries`: record by record, a torn tail or a
damaged line skipped, never an error), never from its trace: a row holds what the task list shows and filters
on, and its final answer's text for the search. A run still being written is read again when its
``results.jsonl`` changes (size, time or file), at most once per twice the time the last read took, so a long
live run is not read back to back; each read runs in a thread of its own, and a page waits for it only so long
(`TaskIndex.patience`). The clock is injected (tests pin it).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from redraft.errors import UserError
from redraft.protocols.messages import Result
from redraft.rundir import RunReader, refinement_change
from redraft.rundir.layout import RESULTS

Clock = Callable[[], float]


@dataclass(slots=True)
class Row:
    """One task as the list shows and filters it."""

    index: int
    task_id: str
    passed: bool
    """The loop's feedback verdict on the final answer."""
    graded_pass: bool | None
    """The held-out grade's (a judge's when the run was judged); None: not graded."""
    change: str | None
    """``fixed`` / ``broken`` by refinement, on the grade when graded, else on the feedback."""
    rounds: int
    stop_reason: str
    error_type: str | None
    cost_usd: float
    tokens: int
    wall_s: float
    text: str
    """The final answer's text: what the search reads, and what a label's digest is of."""
    answer: str | None

    @classmethod
    def of(cls, index: int, r: Result) -> Row:
        graded = r.graded_pass is not None
        change = refinement_change(r.initial_graded_pass, r.graded_pass) if graded else None
        if not graded:
            change = refinement_change(r.initial_passed, r.passed)
        return cls(
            index=index,
            task_id=r.task_id,
            passed=r.passed,
            graded_pass=r.graded_pass,
            change=change,
            rounds=r.rounds,
            stop_reason=r.stop_reason,
            error_type=r.error_type,
            cost_usd=r.usage.cost_usd,
            tokens=r.usage.total_tokens,
            wall_s=r.wall_s,
            text=r.text or "",
            answer=r.answer,
        )


@dataclass(frozen=True)
class Seen:
    """When the viewer saw a run's record count: what its rate is measured from."""

    at: float
    done: int


@dataclass
class Reading:
    """A read of a run's records under way, in a thread of its own: the rows so far."""

    stamp: tuple[int, int, int] | None
    at: float
    rows: list[Row] = field(default_factory=list)
    finished: threading.Event = field(default_factory=threading.Event)
    error: UserError | None = None


@dataclass
class TaskIndex:
    """The rows of one run directory, read again when its records change (see the module docstring).

    A read runs in a thread of its own; a caller waits for it at most ``patience`` seconds (None: until it
    ends), then has the rows of the last read that ended, or, before any has, the rows read so far
    (`loading` says so): a long run's first page is shown before all its records are read."""

    root: Path
    clock: Clock = time.monotonic
    patience: float | None = None
    rows: list[Row] = field(default_factory=list)
    _stamp: tuple[int, int, int] | None = None
    _next_read: float = 0.0
    _seen: list[Seen] = field(default_factory=list)
    _reading: Reading | None = None
    _read_once: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def loading(self) -> bool:
        """Whether the first read of the records is still under way."""
        return not self._read_once

    def fresh(self) -> list[Row]:
        """The rows, read again first if the records changed (and the last read is not too recent)."""
        with self._lock:
            now = self.clock()
            stamp = _stamp(self.root / RESULTS)
            if self._reading is None and stamp != self._stamp and (not self._read_once or now >= self._next_read):
                self._reading = Reading(stamp, now)
                threading.Thread(target=self._read, args=(self._reading,), daemon=True).start()
            reading = self._reading
        if reading is not None:
            reading.finished.wait(self.patience)
            if reading.error is not None:
                raise reading.error
        with self._lock:
            if not self._read_once:
                return list(reading.rows) if reading is not None else []
            if not self._seen:
                self._seen = [Seen(now, len(self.rows))]
            return self.rows

    def _read(self, reading: Reading) -> None:
        started = time.perf_counter()
        try:
            for row in read_rows(self.root):
                reading.rows.append(row)
        except UserError as exc:  # no longer a run directory (removed, replaced): said to the caller
            reading.error = exc
        with self._lock:
            if reading.error is None:
                self.rows, self._stamp, self._read_once = reading.rows, reading.stamp, True
                self._next_read = reading.at + 2 * (time.perf_counter() - started)
                self._seen = [*self._seen[-9:], Seen(reading.at, len(reading.rows))]
            self._reading = None
        reading.finished.set()

    def settle(self) -> None:
        """Wait for a read under way to end (none: return at once)."""
        reading = self._reading
        if reading is not None:
            reading.finished.wait()

    def rate(self) -> float | None:
        """Tasks a second, over the reads that saw the run grow (None until it has been seen to)."""
        if len(self._seen) < 2:
            return None
        first, last = self._seen[0], self._seen[-1]
        if last.done <= first.done or last.at <= first.at:
            return None
        return (last.done - first.done) / (last.at - first.at)


def read_rows(root: Path) -> Iterable[Row]:
    """A run's rows, streamed from its records (`RunReader.entries`)."""
    for i, entry in enumerate(RunReader(root).entries()):
        yield Row.of(i, entry.result)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns
