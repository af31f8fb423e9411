"""The model hosts as the driver sees them: asked every few seconds for their vitals
(`redraft.backends._vitals.HostVitals`), each answer set against one about `WINDOW_S` earlier.

What that gives the progress line: the calls and tokens the hosts made since the run began (calls still decoding
included, so a run whose first round takes minutes is seen working), the model's decode rate over the window,
and the share of a core each host got while it had calls to serve. A host getting less than `STARVED_CORES` of a
core is starved by other work on the machine (at Ray's default worker niceness, beside three busy processes, it
got 4 to 6 %: measured), and the line says so.

A host already up when the watch first hears from it counts from that answer (another run may have used it); one
that appears later was made by this run, and counts from zero.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from redraft.actors._endpoints import NamedActorPoll
from redraft.backends import HOST_PREFIX, HostVitals

WINDOW_S = 10.0
"""The window the decode rate and the core share are measured over (at least, once the host is that old)."""
STARVED_CORES = 0.25
"""Less CPU than this while busy (in cores) is a host starved by other work."""
EVERY_S = 2.0
"""How often the hosts are asked."""


@dataclass(frozen=True)
class HostState:
    """One model host as the progress line shows it."""

    model: str
    calls: int
    """Calls it finished since the run began."""
    tokens: int
    """Tokens it generated since the run began, those of calls still decoding included."""
    tokens_per_s: float | None
    """Its decode rate over the last window (tokens over busy seconds); None before a window with work."""
    cores: float | None
    """The CPU it got while busy over the last window, in cores; None before a window with work."""
    threads: int = 0
    """The threads it decodes with now."""
    most_threads: int = 0
    """The threads it decodes with on a quiet machine: more than `threads` while other work crowds the cores."""

    @property
    def crowded(self) -> bool:
        """Whether it decodes with fewer threads than it has: other work on the machine."""
        return self.threads < self.most_threads

    @property
    def starved(self) -> bool:
        """Whether it got far less CPU than its threads ask for: other work on the machine."""
        return self.cores is not None and self.cores < STARVED_CORES


class HostRates:
    """Each host's vitals as they come in, and its `HostState` from them (see the module docstring)."""

    def __init__(self) -> None:
        self._base: dict[str, HostVitals | None] = {}
        """Each host's answer the run counts from (None: from zero)."""
        self._seen: dict[str, deque[HostVitals]] = {}
        self._heard = False

    def add(self, replies: dict[str, HostVitals]) -> None:
        for name, vitals in replies.items():
            if name not in self._base:
                self._base[name] = None if self._heard else vitals
            history = self._seen.setdefault(name, deque())
            history.append(vitals)
            while len(history) > 2 and vitals.at - history[1].at >= WINDOW_S:
                history.popleft()
        self._heard = True

    def states(self) -> list[HostState]:
        return [self._state(name, history) for name, history in sorted(self._seen.items())]

    def _state(self, name: str, history: deque[HostVitals]) -> HostState:
        now, then, base = history[-1], history[0], self._base[name]
        busy = now.busy_s - then.busy_s
        worked = busy > 0.5 and len(history) > 1
        return HostState(
            model=now.model,
            calls=now.calls - (base.calls if base else 0),
            tokens=now.tokens - (base.tokens if base else 0),
            tokens_per_s=(now.tokens - then.tokens) / busy if worked else None,
            cores=(now.cpu_s - then.cpu_s) / busy if worked else None,
            threads=now.threads,
            most_threads=now.most_threads or now.threads,
        )


class HostWatch:
    """Polls the cluster's model hosts (see the module docstring); `states` is what was heard so far."""

    def __init__(self, on_states: Callable[[list[HostState]], None] | None = None) -> None:
        self._rates = HostRates()
        self._on_states = on_states
        self._poll = NamedActorPoll(HOST_PREFIX, "vitals", self._heard, EVERY_S)

    def poll(self) -> None:
        self._poll.poll()

    def states(self) -> list[HostState]:
        return self._rates.states()

    def _heard(self, replies: dict[str, HostVitals]) -> None:
        self._rates.add(replies)
        if self._on_states is not None:
            self._on_states(self._rates.states())
