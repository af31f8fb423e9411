"""The driver's dispatch loop: at most ``max_in_flight`` tasks out, each graded and written as it lands.

A task goes through two stages: its loop on an arbiter (which gets the task
without its gold, unless the run uses oracle feedback), then, when it has gold to
be graded against, its held-out grade on a grader (`redraft.run.grading`). Only
then is it written, trace and result together.

Every dispatched task is recorded exactly once. A task that fails ends alone
with stop reason ``error`` and its cause (typed, in ``error_type``); so does a
task whose arbiter call fails outright, and the run goes on with a new arbiter.
Refused credentials are the one failure that stops the run, since every task
would fail alike.

Run budgets (tokens, calls, USD, seconds) are checked before each dispatch
against everything the run directory records, earlier invocations included;
once one is spent nothing more is dispatched. Tasks in flight then finish,
except under the time budget, which is a deadline: each task is dispatched with
the time left as its timeout (`RunClock.task_limit`), so it stops there with the
best of its finished rounds and says so (``stop_limit == "run_deadline"``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from redraft.actors.pools import RolePool
from redraft.errors import AuthenticationError, describe, error_type
from redraft.protocols.messages import Grade, Result, StopLimit, Task, Usage, decode_as, encode
from redraft.run.grading import grade_request, graded_frames
from redraft.rundir import RunStore
from redraft.scenarios import Scenario

ProgressHook = Callable[[Result], None]
BudgetCheck = Callable[[Usage, float], str | None]
"""Why the run's budget is spent by this usage after this many seconds, or None."""


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


@dataclass
class Pending:
    """A task out: in its loop (``frames`` None), or being graded (the loop's frames kept for the write)."""

    task: Task
    """The whole task, gold included (the driver's copy)."""
    slot: int
    frames: list[bytes] | None = None


class Dispatcher:
    """Sends tasks to the arbiters, then to the graders, and writes each as it lands; see the module docstring."""

    def __init__(
        self,
        arbiters: list[Any],
        new_arbiter: Callable[[], Any],
        store: RunStore,
        *,
        scenario: Scenario,
        graders: RolePool,
        max_in_flight: int,
        clock: RunClock,
        oracle: bool = False,
        task_timeout: float | None = None,
        budget_spent: BudgetCheck = lambda _spent, _elapsed: None,
        on_result: ProgressHook | None = None,
    ) -> None:
        self.arbiters = arbiters
        self.new_arbiter = new_arbiter
        self.store = store
        self.scenario = scenario
        self.graders = graders
        self.oracle = oracle
        self.max_in_flight = max_in_flight
        self.clock = clock
        self.task_timeout = task_timeout
        self.budget_spent = budget_spent
        self.on_result = on_result
        self.in_flight: dict[Any, Pending] = {}
        """Each task out, by the reference of its arbiter's (or grader's) call."""
        self.cut = 0
        """Tasks the run's deadline stopped while in flight."""

    def run(self, tasks: Iterator[Task]) -> str | None:
        """Dispatch ``tasks`` until they run out or a run budget is spent; why it stopped early, or None."""
        stopped_by: str | None = None
        for i, task in enumerate(tasks):
            while len(self.in_flight) >= self.max_in_flight:
                self._land_ready()
            stopped_by = self.budget_spent(self.store.spent, self.clock.elapsed())
            if stopped_by:
                break
            self._send(task, i % len(self.arbiters))
        while self.in_flight:
            self._land_ready()
        if self.cut:  # the time budget ran out with tasks in flight: they stopped early, and the run says why
            stopped_by = stopped_by or self.budget_spent(self.store.spent, self.clock.elapsed()) or "run budget: time"
            stopped_by += f"; {self.cut} task(s) in flight stopped at the deadline"
        return stopped_by

    def _send(self, task: Task, slot: int) -> None:
        timeout, limit = self.clock.task_limit(self.task_timeout)
        seen = task if self.oracle else task.without_gold()  # the loop never sees the gold
        self.in_flight[self.arbiters[slot].run.remote(encode(seen), timeout, limit)] = Pending(task, slot)

    def _land_ready(self) -> None:
        """Wait for one task to finish, then land it and every other that has finished too."""
        import ray

        ready, rest = ray.wait(list(self.in_flight), num_returns=1)
        if rest:  # one wait per finished task would cost a round trip each
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        for ref in ready:
            self._land(ref)

    def _land(self, ref: Any) -> None:
        import ray

        pending = self.in_flight.pop(ref)
        if pending.frames is not None:
            self._write(*self._graded(pending.frames, ref))
            return
        task = pending.task
        try:
            frames: list[bytes] = ray.get(ref)
            result = decode_as(frames[-1], Result)
        except AuthenticationError as exc:
            # Credentials refused: every task would fail alike. Stop now; finished
            # tasks are kept and a rerun with the same --out resumes after the fix.
            raise AuthenticationError(describe(exc)) from None
        except Exception as exc:  # the arbiter itself failed: account for the task anyway
            if isinstance(exc, ray.exceptions.RayActorError):
                self.arbiters[pending.slot] = self.new_arbiter()
            result = failed_result(task, exc)
            frames = [encode(task.without_gold()), encode(result)]
        request = grade_request(self.scenario, task, frames)
        if request is None:
            self._write(frames, result)
            return
        member = self.graders.members[pending.slot % len(self.graders.members)]
        self.in_flight[member.grade.remote(encode(request))] = Pending(task, pending.slot, frames)

    def _graded(self, frames: list[bytes], ref: Any) -> tuple[list[bytes], Result]:
        """The loop's frames with the grader's reply; a failed grader call leaves the grades missing."""
        import ray

        try:
            reply: bytes = ray.get(ref)
        except Exception as exc:
            task_id = decode_as(frames[-1], Result).task_id
            reply = encode(Grade(task_id=task_id, error=describe(exc)))
        return graded_frames(frames, reply)

    def _write(self, frames: list[bytes], result: Result) -> None:
        self.cut += result.stop_limit == "run_deadline"
        self.store.append(frames, result)
        if self.on_result is not None:
            self.on_result(result)


def failed_result(task: Task, exc: BaseException) -> Result:
    """The result of a task whose arbiter call failed outright: stop reason ``error``, its cause typed."""
    return Result(
        task_id=task.task_id,
        scenario=task.scenario,
        answer=None,
        text="",
        score=0.0,
        passed=False,
        initial_score=0.0,
        initial_passed=False,
        rounds=0,
        stop_reason="error",
        usage=Usage(),
        wall_s=0.0,
        error=describe(exc),
        error_type=error_type(exc),
    )
