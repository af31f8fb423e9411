"""The endpoints' limiters as the driver sees them: asked every few seconds how many calls each lets in flight
and how often its server throttled, for the progress line and the metrics.

Every limiter of the cluster is a named actor (`redraft.backends._ratelimit`), shared by every run and every
lane of a comparison that calls its endpoint; the driver finds them by name. Asking never blocks the
dispatcher's loop: the replies are collected on a later turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from redraft.actors._metrics import RunMetrics
from redraft.backends import LIMITER_PREFIX, EndpointState

__all__ = ["EndpointHook", "EndpointState", "EndpointWatch"]

EndpointHook = Callable[[list[EndpointState]], None]
"""Told the endpoints' states, every `EndpointWatch.EVERY_S` at most."""


class EndpointWatch:
    """Polls the cluster's endpoint limiters (see the module docstring)."""

    EVERY_S = 2.0

    def __init__(
        self, metrics: RunMetrics, on_states: EndpointHook | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._metrics, self._on_states, self._clock = metrics, on_states, clock
        self._handles: dict[str, Any] = {}
        self._asked: dict[str, Any] = {}
        self._last = -self.EVERY_S

    def poll(self) -> None:
        """Collect the replies that are in; ask again once `EVERY_S` has passed since the last asking."""
        import ray

        if self._asked:
            refs = list(self._asked.values())
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=True)
            if len(ready) < len(refs):
                return
            states: list[EndpointState] = []
            for name, ref in self._asked.items():
                try:
                    states.append(ray.get(ref))
                except ray.exceptions.RayError:  # it went with its maker; the next caller makes it again
                    self._handles.pop(name, None)
            self._asked = {}
            self._report(states)
        now = self._clock()
        if now - self._last < self.EVERY_S:
            return
        self._last = now
        for name in ray.util.list_named_actors():
            if isinstance(name, str) and name.startswith(LIMITER_PREFIX) and name not in self._handles:
                try:
                    self._handles[name] = ray.get_actor(name)
                except ValueError:  # gone between the listing and the lookup
                    continue
        self._asked = {name: handle.state.remote() for name, handle in self._handles.items()}

    def _report(self, states: list[EndpointState]) -> None:
        states.sort(key=lambda s: s.endpoint)
        for state in states:
            self._metrics.endpoint(state)
        if self._on_states is not None and states:
            self._on_states(states)
