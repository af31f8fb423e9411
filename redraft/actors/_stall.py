"""When the machinery fails every task alike: a run stops for the cluster only once nothing has succeeded for a while.

A failure under one task says little: under a storm of kills every task fails now and then, and each is
redone from its last finished round (`redraft.actors._attempts`). What says the cluster cannot run the tasks is
time with no success at all: no round finished (its model calls and checks answered), no task finished, no
grade came back, while the machinery kept failing. `StallWatch` keeps that time and stops the run
(`ClusterError`, exit 1, nothing recorded for the tasks in flight, so a rerun with the same ``--out``
resumes them) once it passes the stall window, naming what kept failing meanwhile.

The window follows the run's measured speed: `StallWatch.factor` times the slowest round the run has seen
(from a task's dispatch or its previous round to the round's end), and at least `StallWatch.floor_s`, so a
run that is merely slow on a loaded machine is not stopped; ``--stall-window`` sets it instead.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from redraft.errors import ClusterError, InfrastructureError


@dataclass
class StallWatch:
    """The run's time since anything last succeeded, and what failed meanwhile (see the module docstring)."""

    window_s: float | None = None
    """The stall window set by ``--stall-window``; None: it follows the measured speed."""
    now: Callable[[], float] = time.monotonic
    floor_s: float = 120.0
    """The shortest window that follows the measured speed (the first rounds of a run include its start)."""
    factor: float = 10.0
    """The window, in slowest rounds seen."""
    successes: int = 0
    """Rounds, tasks and grades that succeeded so far: the evidence that the machinery works for someone."""
    failures: int = 0
    """Attempts the machinery failed under so far, every task's."""
    slowest_s: float = 0.0
    """The slowest round seen so far."""
    failing: Counter[str] = field(default_factory=Counter)
    """What failed since the last success, by cause and role."""
    last_success: float = field(init=False)

    def __post_init__(self) -> None:
        self.last_success = self.now()

    def window(self) -> float:
        """The stall window now: set, or `factor` slowest rounds (at least `floor_s`)."""
        if self.window_s is not None:
            return self.window_s
        return max(self.floor_s, self.factor * self.slowest_s)

    def succeeded(self, round_s: float | None = None) -> None:
        """Something succeeded (a round, which took ``round_s``; a task; a grade): the machinery works."""
        self.successes += 1
        self.last_success = self.now()
        self.failing.clear()
        if round_s is not None:
            self.slowest_s = max(self.slowest_s, round_s)

    def failed(self, failure: InfrastructureError) -> None:
        """The machinery failed under a task."""
        self.failures += 1
        self.failing[failure.cause if failure.role is None else f"{failure.cause} ({failure.role})"] += 1

    def check(self) -> None:
        """`ClusterError` when the machinery kept failing and nothing succeeded for the stall window."""
        stalled = self.now() - self.last_success
        if self.failing and stalled > self.window():
            counted = ", ".join(f"{cause} x{n}" for cause, n in self.failing.most_common())
            raise ClusterError(
                f"nothing succeeded for {stalled:.0f} s (no model call, no check, no task; stall window "
                f"{self.window():.0f} s) while the machinery kept failing: {counted}; finished tasks are kept: "
                "rerun with the same --out once the cluster is steady"
            )
