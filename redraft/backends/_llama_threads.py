"""How many threads the batched host decodes with: all its cores on a quiet machine, fewer on a crowded one.

llama.cpp's threads meet at a barrier after every operation of a decode, so a step waits for the slowest; when
the machine has other runnable work, the scheduler leaves one of them out for a time slice at almost every step
and the others spin, waiting. Measured (2026-12-06, 2 cores, the embedded model, one sequence): two threads
decode 49 tokens/s alone and 1 thread 30; beside one busy process two threads fall to 2.1 tokens/s and one thread
keeps 29; beside three, 3.3 against 14 (`docs/benchmarks.md`, "The demo on a busy machine").

`ThreadGovernor` watches the one signal that says so, from inside the decode: the share of the wall time the
decoding thread (llama.cpp's first worker) was on a CPU. Near 1 the threads run; well below it they wait for
cores. Over each `WINDOW_S` of decoding it halves the threads when that share is under `CROWDED`, and when one
decoding thread has its core (`FREE`) and the machine has idle cores for more (`idle_cores`, from
``/proc/stat``; unknown elsewhere), it tries twice as many for a window: kept if they run, else back, and the
next try waits twice as long (at most `LONGEST_WAIT` windows).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

WINDOW_S = 3.0
"""The decoding time each decision is measured over."""
CROWDED = 0.75
"""Under this share of the wall time on a CPU, the threads wait for cores: halve them."""
FREE = 0.9
"""At or above this share, fewer threads than the most have their cores: more may be tried."""
LONGEST_WAIT = 32
"""The most windows between a failed try of more threads and the next."""


class MachineIdle:
    """The machine's idle cores since the last call, from ``/proc/stat``'s first line; None where it cannot be
    read, and on the first call."""

    def __init__(self, path: str = "/proc/stat") -> None:
        self._path = path
        self._last: tuple[int, int] | None = None

    def __call__(self) -> float | None:
        try:
            with open(self._path, encoding="ascii") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle, total = sum(fields[3:5]), sum(fields)
        last, self._last = self._last, (idle, total)
        if last is None or total <= last[1]:
            return None
        return (idle - last[0]) / (total - last[1]) * (os.cpu_count() or 1)


class ThreadGovernor:
    """The decode's thread count (see the module docstring), set through ``apply`` at the end of the window that
    decided it. Used by one thread: the one that decodes."""

    def __init__(
        self,
        most: int,
        *,
        apply: Callable[[int], object] = lambda threads: None,
        idle_cores: Callable[[], float | None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        on_cpu: Callable[[], float] = time.thread_time,
    ) -> None:
        self.most = max(1, most)
        self.threads = self.most
        self.changes = 0
        """How many times the count changed (read by tests and benchmarks)."""
        self._apply = apply
        """Sets llama.cpp's count: called with each new count, between two decodes."""
        self._idle = idle_cores if idle_cores is not None else MachineIdle()
        self._clock, self._on_cpu = clock, on_cpu
        self._wall = self._cpu = 0.0
        self._trying = False
        self._wait = self._next_wait = 0

    def timed(self, decode: Callable[[], T]) -> T:
        """``decode()``, its wall and on-CPU time counted; at the end of a window, the count for the next one."""
        wall, cpu = self._clock(), self._on_cpu()
        try:
            return decode()
        finally:
            self._wall += self._clock() - wall
            self._cpu += self._on_cpu() - cpu
            if self._wall >= WINDOW_S:
                share = self._cpu / self._wall
                self._wall = self._cpu = 0.0
                self._decide(share, self._idle())

    def _decide(self, share: float, idle: float | None) -> None:
        """The count for the next window, from the last one's share on a CPU and the machine's idle cores."""
        if share < CROWDED and self.threads > 1:
            if self._trying:  # the try failed: wait twice as long before the next
                self._next_wait = min(max(1, 2 * self._next_wait), LONGEST_WAIT)
            self._wait = self._next_wait
            self._set(self.threads // 2, trying=False)
        elif self._trying:  # the try ran: keep it, and try again at once when it has its cores
            self._trying, self._next_wait = False, 0
        elif share >= FREE and self.threads < self.most:
            if self._wait > 0:
                self._wait -= 1
                return
            more = min(self.most, 2 * self.threads)
            if idle is None or idle >= (more - self.threads) / 2:
                self._set(more, trying=True)

    def _set(self, threads: int, *, trying: bool) -> None:
        self.threads, self._trying = threads, trying
        self.changes += 1
        self._apply(threads)
