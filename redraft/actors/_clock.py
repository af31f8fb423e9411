"""The run's clock: its wall time, earlier invocations included, and the deadline of a time budget."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from redraft.protocols.messages import StopLimit


@dataclass(frozen=True)
class RunClock:
    """The run's wall time, earlier invocations included, and its deadline if it has a time budget."""

    started: float
    """``now()`` when this invocation started."""
    before_s: float = 0.0
    """Wall time of earlier invocations (from the manifest)."""
    budget_s: float | None = None
    now: Callable[[], float] = time.monotonic

    def elapsed(self) -> float:
        return self.before_s + self.now() - self.started

    def task_limit(self, task_timeout: float | None) -> tuple[float | None, StopLimit]:
        """How long a task dispatched now may run, and which limit that is."""
        if self.budget_s is None:
            return task_timeout, "task_timeout"
        left = max(self.budget_s - self.elapsed(), 0.0)
        if task_timeout is None or left < task_timeout:
            return left, "run_deadline"
        return task_timeout, "task_timeout"
