"""What a model host says of itself while it works: calls finished, tokens made so far (calls still decoding
included), the wall time it had calls to serve, and the CPU time its process got.

The driver asks every node's host now and then (`redraft.actors._hosts`) and divides one answer by an earlier
one: tokens over busy seconds is the model's decode rate, CPU seconds over busy seconds the share of a core it
got. A host whose threads ask for whole cores and get a twentieth of one is being starved by other work on the
machine; the progress line says so rather than looking dead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import msgspec

HOST_PREFIX = "redraft-model-host-"
"""Every model host's actor name starts so (one per model file and node)."""


class HostVitals(msgspec.Struct, frozen=True, kw_only=True):
    """A model host's counters since it started: each only grows."""

    model: str
    """The model file's base name."""
    threads: int
    """The threads it decodes with now: the cores it asks for while busy."""
    most_threads: int = 0
    """The threads it decodes with on a quiet machine (fewer now: other work crowds the cores); 0: as many."""
    calls: int
    """Calls finished."""
    tokens: int
    """Tokens generated, those of calls still decoding included."""
    busy_s: float
    """Wall seconds during which at least one call was in the host."""
    cpu_s: float
    """CPU seconds its process got (every thread), while busy or not."""
    at: float
    """When this was read, on the host's monotonic clock."""


class BusyClock:
    """Wall time during which at least one call is in (the clock injected). Thread-safe: the in-process host
    may serve several event loops."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._in = 0
        self._since = 0.0
        self._total = 0.0

    def enter(self) -> None:
        with self._lock:
            if self._in == 0:
                self._since = self._clock()
            self._in += 1

    def leave(self) -> None:
        with self._lock:
            self._in -= 1
            if self._in == 0:
                self._total += self._clock() - self._since

    def seconds(self) -> float:
        """Busy seconds so far, a call still in counted up to now."""
        with self._lock:
            return self._total + (self._clock() - self._since if self._in else 0.0)
