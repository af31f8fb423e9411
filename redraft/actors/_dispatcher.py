"""The driver's dispatch loop: at most ``max_in_flight`` tasks out, each graded and written as it lands.

Every dispatched task is recorded exactly once, and ``error`` only ever means
the task's own failure (its check raised, the model answered nothing, the server
refused this request): such a task ends alone with stop reason ``error`` and its
cause typed in ``error_type``, and the run goes on. A check that fails on every
candidate of the run's first tasks is the check's fault, not theirs: the run stops
and nothing is written for them (`redraft.actors._attempts.CheckGuard`). When the machinery fails
under a task instead (its arbiter, a role actor or a node died, a call hung, a
backend stayed unreachable), the task is not written but redone
(`redraft.actors._attempts`): with the replies of its finished rounds, on a live
arbiter, within a bounded number of attempts. The loop streams a checkpoint per
finished round (`redraft.actors._arbiter.ArbiterActor.stream`) to keep those replies.
A timeout that overlapped a member's death (`redraft.actors._fleet.Fleet.disturbances`) is
redone too while attempts are left, so a timeout in the record is the task's own time.

See docs/architecture.md, section "The dispatch loop's stages and waits".
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from redraft.actors._attempts import (
    AttemptPolicy,
    Breaker,
    CheckGuard,
    Pending,
    TaskAttempts,
    failed_result,
    given_up,
)
from redraft.actors._clock import RunClock
from redraft.actors._endpoints import EndpointWatch
from redraft.actors._grading import GRADE_WATCHDOG_S, GradeStage
from redraft.actors._hosts import HostWatch
from redraft.actors._leases import Lease
from redraft.actors._live import LiveHook, LiveTally
from redraft.actors._metrics import RunMetrics
from redraft.actors._stall import StallWatch
from redraft.backends.pricing import PriceTable, default_prices
from redraft.engine.grader import grade_request
from redraft.errors import (
    AuthenticationError,
    InfrastructureError,
    Interrupted,
    cause_of,
    describe,
    machinery_failure,
)
from redraft.protocols.messages import Result, Task, Usage, decode, decode_as, encode
from redraft.rundir import RunStore
from redraft.scenarios import Scenario

ProgressHook = Callable[[Result], None]
BudgetCheck = Callable[[Usage, float], str | None]
"""Why the run's budget is spent by this usage after this many seconds, or None."""

WATCHDOG_GRACE_S = 30.0
"""A task with a timeout comes back by then, or its arbiter is stuck."""
DEFAULT_WATCHDOG_S = 3600.0
"""The watchdog of a run with no task timeout."""
TICK_S = 0.5
"""The longest the loop waits before it looks at the heartbeat, the watchdogs and the retry queue."""


def _never_spent(_spent: Usage, _elapsed: float) -> str | None:
    return None


@dataclass(frozen=True)
class DispatchRules:
    """What a run asks of its dispatch: how many tasks out at once, how long each may take, when to stop."""

    scenario: Scenario
    """Whose grade a finished task gets (`redraft.engine.grader.grade_request`)."""
    max_in_flight: int
    oracle: bool = False
    """The loop sees the gold (an oracle-feedback run); otherwise a task goes out without it."""
    task_timeout: float | None = None
    task_watchdog: float | None = None
    """A task's watchdog deadline in place of its timeout plus `WATCHDOG_GRACE_S`."""
    budget_spent: BudgetCheck = _never_spent
    policy: AttemptPolicy = field(default_factory=AttemptPolicy)
    judged: bool = False
    """A judge grades every finished task (``--judge``), gold or not."""
    judge_every_sample: bool = False
    """The judge grades every candidate, not only the final answer and round 0's leader (a run of one round)."""
    prices: PriceTable = field(default_factory=default_prices)
    """What a judge's calls are priced by, as the arbiters price the loop's."""
    grade_watchdog: float = GRADE_WATCHDOG_S
    """How long a grader may take on a task (`redraft.actors._batches.Batches.grade_watchdog_s`)."""
    stall_window: float | None = None
    """How long nothing may succeed while the machinery fails before the run stops (`redraft.actors._stall`);
    None: it follows the run's measured speed."""


class Dispatcher:
    """Sends tasks to the arbiters, then to the graders, and writes each as it lands; see the module docstring."""

    def __init__(
        self,
        fleet: Lease,
        store: RunStore,
        rules: DispatchRules,
        *,
        clock: RunClock,
        on_result: ProgressHook | None = None,
        breaker: Breaker | None = None,
        metrics: RunMetrics | None = None,
        stop: threading.Event | None = None,
        endpoints: EndpointWatch | None = None,
        hosts: HostWatch | None = None,
        on_live: LiveHook | None = None,
    ) -> None:
        self.fleet = fleet
        self.store = store
        self.rules = rules
        self.clock = clock
        self.on_result = on_result
        self.breaker = breaker or Breaker({})
        self.metrics = metrics or RunMetrics()
        self.endpoints = endpoints
        """Asked once a turn for the endpoints' limiters (it asks them every few seconds)."""
        self.hosts = hosts
        """Asked once a turn for the model hosts' vitals (it asks them every few seconds)."""
        self.on_live = on_live
        self.tally = LiveTally()
        self.in_flight: dict[Any, Pending] = {}
        """Each task out, by its arbiter's stream (or its grader call's reference)."""
        self.retries: list[tuple[float, int, Task, TaskAttempts]] = []
        """Tasks to redo: a heap by the time they may go again."""
        self._seq = itertools.count()
        self.cut = 0
        """Tasks the run's deadline stopped while in flight."""
        self.retried = 0
        """Attempts that the machinery's failure ended (each redone, or its task stopped as poison)."""
        self.stall = StallWatch(rules.stall_window, now=clock.now)
        """What succeeded (the evidence that the machinery works for others) and what failed since."""
        self.check_guard = CheckGuard()
        self.grading = GradeStage(
            fleet, clock, self.in_flight, self._write, rules.prices, rules.grade_watchdog, self.metrics
        )
        self.written = 0
        """Tasks written to the run directory by this invocation."""
        self.stop = stop or threading.Event()
        """Set (from a signal handler, another thread) to stop at once: the tasks in flight are cancelled."""

    def run(self, tasks: Iterator[Task]) -> str | None:
        """Dispatch ``tasks`` until they run out or a run budget is spent; why it stopped early, or None.

        `Interrupted` when `stop` is set: the tasks in flight are cancelled and not recorded.
        """
        source, exhausted, stopped_by = iter(tasks), False, None
        try:
            while True:
                if self.stop.is_set():
                    raise Interrupted()
                while len(self.in_flight) < self.rules.max_in_flight:
                    if self._send_due_retry():
                        continue
                    if exhausted or stopped_by:
                        break
                    stopped_by = self.rules.budget_spent(self.store.spent, self.clock.elapsed())
                    task = None if stopped_by else next(source, None)
                    if task is None:
                        exhausted = True
                        break
                    self._send(task, TaskAttempts())
                self.metrics.in_flight(len(self.in_flight))  # once a turn: each change cost a record
                if self.endpoints is not None:
                    self.endpoints.poll()
                self._tell_live()
                if not self.in_flight and not self.retries:
                    break
                self._turn()
            self.check_guard.finish()
        except BaseException:
            self._cancel_all()  # not written: a rerun with the same --out redoes them
            raise
        if self.cut:  # the time budget ran out with tasks in flight: they stopped early, and the run says why
            stopped_by = (
                stopped_by or self.rules.budget_spent(self.store.spent, self.clock.elapsed()) or "run budget: time"
            )
            stopped_by += f"; {self.cut} task(s) in flight stopped at the deadline"
        return stopped_by

    def _tell_live(self) -> None:
        """The hosts polled, and the run as it goes told to ``on_live``."""
        if self.hosts is not None:
            self.hosts.poll()
        if self.on_live is not None:
            out = ((p.task.task_id, p.round if p.grading is None else None) for p in self.in_flight.values())
            self.on_live(self.tally.live(out, self.hosts.states() if self.hosts else []))

    # ------------------------------------------------------------ sending

    def _send_due_retry(self) -> bool:
        if not self.retries or self.retries[0][0] > self.clock.now():
            return False
        _, _, task, attempts = heapq.heappop(self.retries)
        self._send(task, attempts)
        return True

    def _send(self, task: Task, attempts: TaskAttempts) -> None:
        timeout, limit = self.clock.task_limit(self.rules.task_timeout)
        seen = task if self.rules.oracle else task.without_gold()  # the loop never sees the gold
        if attempts.arbiter_deaths >= self.rules.policy.quarantine_after:
            slot, arbiter = None, self.fleet.quarantine()
        else:
            serving = self.fleet.serving() or range(len(self.fleet.arbiters))  # not one still starting
            slot = serving[next(self._seq) % len(serving)]
            arbiter = self.fleet.arbiters[slot]
        replay = list(attempts.replay.items()) or None
        stream = arbiter.stream.options(num_returns="streaming").remote(
            encode(seen), timeout, limit, replay, self.fleet.key
        )
        self.in_flight[stream] = Pending(
            task,
            slot,
            arbiter,
            self._deadline(timeout),
            attempts,
            disturbances=self.fleet.disturbances,
            since=self.clock.now(),
        )

    def _deadline(self, timeout: float | None) -> float:
        if self.rules.task_watchdog is not None:
            return self.clock.now() + self.rules.task_watchdog
        return self.clock.now() + (DEFAULT_WATCHDOG_S if timeout is None else timeout + WATCHDOG_GRACE_S)

    # ------------------------------------------------------------ landing

    def _turn(self) -> None:
        """Wait (at most `TICK_S`) for something to land; land it all; then the heartbeat and the watchdogs."""
        import ray

        if self.in_flight:
            keys = list(self.in_flight)
            ready, rest = ray.wait(keys, num_returns=1, timeout=TICK_S, fetch_local=False)
            if ready and rest:  # one wait per landed item would cost a round trip each
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0, fetch_local=False)
                ready += more
            for key in ready:
                self._land(key)
        else:  # only retries waiting for their backoff
            time.sleep(max(0.0, min(TICK_S, self.retries[0][0] - self.clock.now())))
        self.fleet.check()
        self._watchdog()
        self.stall.check()

    def _land(self, key: Any) -> None:
        import ray

        pending = self.in_flight.pop(key)
        if pending.grading is not None:
            self.grading.land(key, pending)
            return
        try:
            frames, pairs, last = ray.get(next(key))
        except StopIteration:
            self._failed(pending, InfrastructureError("the arbiter's stream ended early", cause="StreamEndedError"))
            return
        except AuthenticationError as exc:
            # Credentials refused: every task would fail alike. Stop now; finished
            # tasks are kept and a rerun with the same --out resumes after the fix.
            raise AuthenticationError(describe(exc)) from None
        except Exception as exc:
            failure = machinery_failure(exc)
            if failure is None:  # the arbiter's own code failed on this task: its error, recorded
                self._done(pending, [encode(pending.task.without_gold()), encode(failed_result(pending.task, exc))])
                return
            died = not isinstance(cause_of(exc), InfrastructureError)  # not raised by a live arbiter: it died
            self._failed(pending, failure, arbiter_died=died)
            return
        self.stall.succeeded(self.clock.now() - pending.since)  # a round finished: its calls answered
        pending.since = self.clock.now()
        pending.frames += frames
        pending.pairs += pairs
        if (next_round := self.tally.landed(frames)) >= 0:
            pending.round = next_round
        if not last:
            self.in_flight[key] = pending  # a finished round: wait for the next
            return
        self._done(pending, pending.frames)

    def _failed(self, pending: Pending, failure: InfrastructureError, *, arbiter_died: bool = False) -> None:
        """The machinery failed under ``pending``: redo the task (or stop it as poison), never write the failure."""
        if arbiter_died:
            self.fleet.arbiter_lost(pending.slot, pending.arbiter)
        self.fleet.release(pending.arbiter)
        self.breaker.failed(pending.task.task_id, failure)
        self.stall.failed(failure)
        attempts = pending.attempts
        successes = self.stall.successes
        attempts.failed(
            failure, arbiter_died=arbiter_died, frames=pending.frames, pairs=pending.pairs, successes=successes
        )
        self.retried += 1
        self.metrics.retried(failure.cause)
        if attempts.fruitless >= (policy := self.rules.policy).max_attempts:
            tasks = self.written + len(self.in_flight) + len(self.retries) + 1
            record = given_up(pending.task, attempts, failure, self.breaker, self.stall, tasks=tasks, policy=policy)
            if record is not None:
                self._write([encode(pending.task.without_gold()), encode(record)], record)
                return
        ready_at = self.clock.now() + self.rules.policy.backoff_s(len(attempts.causes), failure)
        heapq.heappush(self.retries, (ready_at, next(self._seq), pending.task, attempts))

    def _done(self, pending: Pending, frames: list[bytes]) -> None:
        """The loop finished: stamp its attempts on the result, then grade it or write it."""
        attempts = pending.attempts
        result = decode_as(frames[-1], Result)
        if self._timed_out_on_the_machinery(pending, result):
            waited = InfrastructureError(
                "the task's time ran out while a role member was killed, died or restarted",
                cause="CallTimeoutError",
                fault="hung",
            )
            self._failed(pending, waited)
            return
        self.fleet.release(pending.arbiter)
        if attempts.causes:
            result = msgspec.structs.replace(result, attempts=attempts.number, retried_for=attempts.causes)
            frames = [*frames[:-1], encode(result)]
        self.breaker.answered(result.usage_by_role)
        request = grade_request(
            self.rules.scenario,
            pending.task,
            [decode(f) for f in frames],
            judged=self.rules.judged,
            every_sample=self.rules.judge_every_sample,
        )
        if request is None:
            self._write(frames, result)
            return
        pending.frames, pending.grading = frames, request
        self.grading.send(pending)

    def _timed_out_on_the_machinery(self, pending: Pending, result: Result) -> bool:
        """Whether ``result`` is a stop at the task's own timeout that may have been spent waiting on a member
        the fleet saw killed, dead or restarted meanwhile (and the task has an attempt left to redo it)."""
        return (
            result.stop_limit == "task_timeout"
            and self.fleet.disturbances > pending.disturbances
            and pending.attempts.number < self.rules.policy.max_attempts
        )

    def _watchdog(self) -> None:
        """Cancel what passed its deadline and redo it as hung (a frozen arbiter, the heartbeat kills)."""
        import ray

        now = self.clock.now()
        for key, pending in [(k, p) for k, p in self.in_flight.items() if p.deadline <= now]:
            del self.in_flight[key]
            ray.cancel(key)
            if pending.grading is not None:
                self.grading.hung(pending)
                continue
            hung = InfrastructureError(
                "the task passed its watchdog deadline (hung)", cause="CallTimeoutError", fault="hung"
            )
            self._failed(pending, hung)

    def _write(self, frames: list[bytes], result: Result) -> None:
        for kept_frames, kept in self.check_guard.admit(frames, result):
            self.written += 1
            self.cut += kept.stop_limit == "run_deadline"
            self.store.append(kept_frames, kept)
            self.metrics.done(kept)
            if self.on_result is not None:
                self.on_result(kept)

    def _cancel_all(self) -> None:
        import ray

        for key in list(self.in_flight):
            ray.cancel(key)
        self.in_flight.clear()
