"""The dispatch's second stage: a finished task's held-out grade, on a grader, then the task written.

A task whose loop finished and that has gold to be graded against (`redraft.engine.grader.grade_request`),
or any finished task when the run has a judge (whose members are then the graders), is sent to a grader
member; one that dies or hangs is asked again on another, at most `GRADE_TRIES` times in all, and
after that the task is written graded as failed, with why (`redraft.engine.grader.failed_grade`), never lost and
never out of the graded rate: the loop's result stands whatever the grader does. An instant grade (the driver's
own, `redraft.actors._placement`) is written at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redraft.actors._attempts import Pending
from redraft.actors._clock import RunClock
from redraft.actors._leases import Lease
from redraft.actors._metrics import RunMetrics
from redraft.actors._ray import is_actor
from redraft.backends.pricing import PriceTable
from redraft.engine.grader import failed_grade, graded
from redraft.errors import describe, error_type, member_failure
from redraft.protocols.messages import Grade, GradeRequest, Result, decode_as, encode

GRADE_TRIES = 3
GRADE_WATCHDOG_S = 600.0
"""A grader's reply comes back by then, or it is stuck: asked again elsewhere."""

Write = Callable[[list[bytes], Result], None]


class GradeStage:
    """Sends finished tasks to the graders and writes each graded task (see the module docstring).

    ``in_flight`` is the dispatcher's own table of what is out: a grader call waits there beside the loops,
    under its reference, so one wait and one watchdog cover both stages.
    """

    def __init__(
        self,
        fleet: Lease,
        clock: RunClock,
        in_flight: dict[Any, Pending],
        write: Write,
        prices: PriceTable | None = None,
        watchdog_s: float = GRADE_WATCHDOG_S,
        metrics: RunMetrics | None = None,
    ) -> None:
        self.fleet = fleet
        self.clock = clock
        self.in_flight = in_flight
        self.write = write
        self.prices = prices
        """What a judge's calls are priced by (`redraft.engine.grader.graded`)."""
        self.watchdog_s = watchdog_s
        """How long a grader may take before it is asked again elsewhere (no limit for a judge whose judgments wait
        for their provider batch, ``--batch``)."""
        self.metrics = metrics or RunMetrics()
        """Where a judge's priced calls are recorded (the model-call series, role ``judge``)."""

    def send(self, pending: Pending) -> None:
        """Ask a grader for ``pending``'s grade (its ``grading`` request), a different one at each try."""
        request = pending.grading
        assert request is not None
        members = [m for m in self.fleet.graders if m is not None]
        member = members[((pending.slot or 0) + pending.grade_tries) % len(members)]
        if not is_actor(member):
            self.written(pending, member.grade_here(request))
            return
        pending.grade_tries += 1
        pending.deadline = self.clock.now() + self.watchdog_s
        self.in_flight[self.fleet.ask_grader(member, encode(request))] = pending

    def land(self, ref: Any, pending: Pending) -> None:
        """The grader's reply; a grader that died or hung is asked again elsewhere, else the task is graded failed."""
        import ray

        try:
            grade = decode_as(ray.get(ref), Grade)
        except Exception as exc:
            if member_failure(exc) and pending.grade_tries < GRADE_TRIES:
                self.send(pending)
                return
            grade = failed_grade(self._asked(pending), describe(exc), error_type(exc))
        self.written(pending, grade)

    def hung(self, pending: Pending) -> None:
        """``pending``'s grader passed its deadline (its call is cancelled): ask another, or write it failed."""
        if pending.grade_tries < GRADE_TRIES:
            self.send(pending)
        else:
            error = f"the grader did not answer within {self.watchdog_s:g} s on each of {GRADE_TRIES} tries"
            self.written(pending, failed_grade(self._asked(pending), error, "hung"))

    @staticmethod
    def _asked(pending: Pending) -> GradeRequest:
        assert pending.grading is not None  # set before any grader was asked
        return pending.grading

    def written(self, pending: Pending, grade: Grade) -> None:
        """Write a graded task: its loop's frames, the `Grade`, the graded `Result` last."""
        ending, result = graded(decode_as(pending.frames[-1], Result), grade, self.prices)
        if grade.usage.calls and (judge := result.usage_by_role.get("judge")) is not None:
            self.metrics.judged(grade.judge or "", judge)  # priced as the task's usage counts it
        self.write([*pending.frames[:-1], *(encode(m) for m in ending)], result)
