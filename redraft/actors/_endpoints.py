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


class NamedActorPoll:
    """Asks every named actor of the cluster whose name starts with ``prefix`` its ``method``, at most every
    ``every_s``, and hands the replies that came back, by actor name, to ``on_replies`` (never blocking: collected
    on a later turn)."""

    def __init__(
        self,
        prefix: str,
        method: str,
        on_replies: Callable[[dict[str, Any]], None],
        every_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._prefix, self._method, self._on_replies, self._every_s, self._clock = (
            prefix,
            method,
            on_replies,
            every_s,
            clock,
        )
        self._handles: dict[str, Any] = {}
        self._asked: dict[str, Any] = {}
        self._last = -every_s

    def poll(self) -> None:
        """Collect the replies that are in; ask again once ``every_s`` has passed since the last asking."""
        import ray

        if self._asked:
            refs = list(self._asked.values())
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=True)
            if len(ready) < len(refs):
                return
            replies: dict[str, Any] = {}
            for name, ref in self._asked.items():
                try:
                    replies[name] = ray.get(ref)
                except ray.exceptions.RayError:  # it went with its maker; the next caller makes it again
                    self._handles.pop(name, None)
            self._asked = {}
            self._on_replies(replies)
        now = self._clock()
        if now - self._last < self._every_s:
            return
        self._last = now
        for name in ray.util.list_named_actors():
            if isinstance(name, str) and name.startswith(self._prefix) and name not in self._handles:
                try:
                    self._handles[name] = ray.get_actor(name)
                except ValueError:  # gone between the listing and the lookup
                    continue
        self._asked = {name: getattr(handle, self._method).remote() for name, handle in self._handles.items()}


class EndpointWatch:
    """Polls the cluster's endpoint limiters (see the module docstring)."""

    EVERY_S = 2.0

    def __init__(
        self, metrics: RunMetrics, on_states: EndpointHook | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._metrics, self._on_states = metrics, on_states
        self._poll = NamedActorPoll(LIMITER_PREFIX, "state", self._report, self.EVERY_S, clock)

    def poll(self) -> None:
        """Collect the replies that are in; ask again once `EVERY_S` has passed since the last asking."""
        self._poll.poll()

    def _report(self, replies: dict[str, EndpointState]) -> None:
        states = sorted(replies.values(), key=lambda s: s.endpoint)
        for state in states:
            self._metrics.endpoint(state)
        if self._on_states is not None and states:
            self._on_states(states)
