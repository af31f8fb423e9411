"""What the driver does when the machinery fails under a task: redo it, quarantine it, or stop the run.

A task whose attempt ended with an `InfrastructureError` (an actor, worker or node
died, a call hung, a backend stayed unreachable) is not written: it goes back to
the queue for another attempt, after a short backoff, with the replies of its
finished rounds (`redraft.engine.arbiter`). The attempts and their causes end up
in its `Result` (``attempts``, ``retried_for``) and in the summary.

Bounds, so nothing loops forever. Only a *fruitless* attempt counts against a
task: one that failed before it finished a round more than the attempts before it
(a redone task resumes from its last finished round, so an attempt that finished
one moved the task on, however it ended). Under a storm of kills a task fails now
and then but keeps moving; a task that kills whatever runs it never does.

See docs/architecture.md, section "Redoing, quarantining and stopping a task".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from redraft.actors._stall import StallWatch
from redraft.errors import CheckBrokenError, ClusterError, InfrastructureError, MachineryFault, describe, error_type
from redraft.protocols.messages import GradeRequest, Result, Task, Usage


@dataclass(frozen=True)
class AttemptPolicy:
    """How often a task is tried again after the machinery failed under it."""

    max_attempts: int = 4
    """Attempts in all, the first included; then the task is a poison task."""
    most_attempts: int = 20
    """Fruitless attempts in a row after which a task that fails where others succeed is a poison task, however
    often the machinery fails the others (see `luck`)."""
    luck: float = 0.01
    """How many of the run's tasks may, by chance, fail as often in a row as a task stopped as poison."""
    quarantine_after: int = 2
    """Arbiter deaths under a task before it runs alone."""
    base_backoff_s: float = 0.5
    max_backoff_s: float = 30.0

    def backoff_s(self, failures: int, failure: InfrastructureError) -> float:
        """The wait before attempt ``failures + 1``: none after a death (the task goes elsewhere at once),
        exponential after a hang or an unreachable backend (the same thing may still be wrong)."""
        if failure.fault == "died":
            return 0.0
        return float(min(self.max_backoff_s, self.base_backoff_s * 2 ** min(failures, 16)))


@dataclass
class TaskAttempts:
    """One task's attempts so far (the driver keeps this only while the task is out)."""

    number: int = 1
    """The attempt under way, 1-based."""
    causes: list[str] = field(default_factory=list)
    """The infrastructure cause of each failed attempt."""
    faults: list[MachineryFault] = field(default_factory=list)
    """How the machinery failed, for each failed attempt."""
    fruitless: int = 0
    """Failed attempts in a row that finished no round beyond what earlier attempts had (see the module
    docstring)."""
    arbiter_deaths: int = 0
    """Of the `fruitless` attempts, those whose arbiter died under them."""
    replay: dict[bytes, bytes] = field(default_factory=dict)
    """Replies of finished rounds, by request frame, kept across attempts."""
    successes_before: int | None = None
    """How many things had succeeded in the run (`redraft.actors._stall.StallWatch.successes`) when the task's
    fruitless attempts began (None: its last attempt moved it on, or it has not failed)."""

    def failed(
        self,
        failure: InfrastructureError,
        *,
        arbiter_died: bool,
        frames: list[bytes],
        pairs: list[tuple[int, int]],
        successes: int = 0,
    ) -> None:
        """Count a failed attempt (``successes``: things that succeeded in the run so far); keep the replies its
        finished rounds received."""
        kept = len(self.replay)
        self.replay.update((frames[q], frames[a]) for q, a in pairs if a < len(frames))
        self.causes.append(failure.cause)
        self.faults.append(failure.fault)
        self.number += 1
        if len(self.replay) > kept:  # it finished a round more: it moves on, whatever ended it
            self.fruitless, self.arbiter_deaths, self.successes_before = 0, 0, None
            return
        if self.successes_before is None:
            self.successes_before = successes
        self.fruitless += 1
        self.arbiter_deaths += arbiter_died


def error_result(task: Task, error: str, error_type: str) -> Result:
    """The record of a task that ended with nothing to show: stop reason ``error``, its cause typed."""
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
        error=error,
        error_type=error_type,
    )


def refused_result(task: Task, attempts: TaskAttempts, endpoint: str) -> Result:
    """The record of a task the endpoint failed on every attempt while it answered other tasks."""
    error = (
        f"TaskRefusedError: {endpoint} failed every call of this task on each of its {len(attempts.causes)} "
        "attempts while it answered other tasks of the run"
    )
    return msgspec.structs.replace(
        error_result(task, error, "TaskRefusedError"), attempts=len(attempts.causes), retried_for=attempts.causes
    )


def poison_result(task: Task, attempts: TaskAttempts) -> Result:
    """The record of a task stopped as a poison task: every attempt ended with the machinery failing."""
    counted = ", ".join(f"{cause} x{n}" for cause, n in Counter(attempts.causes).items())
    error = f"PoisonTaskError: each of its {len(attempts.causes)} attempts ended with the machinery failing ({counted})"
    return msgspec.structs.replace(
        error_result(task, error, "PoisonTaskError"), attempts=len(attempts.causes), retried_for=attempts.causes
    )


def by_chance(attempts: TaskAttempts, stall: StallWatch, tasks: int) -> float:
    """How many of ``tasks`` would fail as many attempts in a row as ``attempts`` by chance, at the rate the
    machinery failed the other tasks' attempts against what succeeded (``stall``'s counts)."""
    failures = stall.failures - len(attempts.causes)
    tried = failures + stall.successes
    return tasks * (failures / tried) ** attempts.fruitless if tried else float(tasks)


def given_up(
    task: Task,
    attempts: TaskAttempts,
    failure: InfrastructureError,
    breaker: Breaker,
    stall: StallWatch,
    *,
    tasks: int,
    policy: AttemptPolicy,
) -> Result | None:
    """The record of ``task``, whose last `AttemptPolicy.max_attempts` attempts the machinery failed (the last
    with ``failure``) with no round finished, when the evidence makes it the task's fault; None when it does
    not (the task is redone); ``stall``: what succeeded and failed in the run so far, over ``tasks`` tasks.

    When every attempt found one endpoint unreachable, the task is the cause only if that endpoint answered
    other tasks meanwhile (`TaskRefusedError`); otherwise the endpoint is down and the run stops (`ClusterError`),
    with nothing recorded for the task. Any other mix of deaths and hangs makes it a poison task if anything
    else succeeded since its fruitless attempts began and so many are not bad luck (`by_chance`, below
    `AttemptPolicy.luck`, or `AttemptPolicy.most_attempts` of them); if nothing did, the machinery fails every
    task alike, and the stall window (`redraft.actors._stall`) decides whether the run goes on.
    """
    endpoint = failure.endpoint
    if endpoint is not None and all(fault == "unreachable" for fault in attempts.faults):
        if not breaker.answered_since_failing(task.task_id, endpoint):
            raise breaker.down(endpoint)
        return refused_result(task, attempts, endpoint)
    if stall.successes == attempts.successes_before:
        return None
    if attempts.fruitless < policy.most_attempts and by_chance(attempts, stall, tasks) >= policy.luck:
        return None
    return poison_result(task, attempts)


class Breaker:
    """Tells an endpoint that is down from a task that makes it fail, by evidence.

    It trips (`ClusterError`) when an endpoint failed whole calls for `trip_after` distinct tasks with no
    answer in between, and it answers `answered_since_failing`: whether the endpoint answered any task after
    a given task first found it failing. A task whose every attempt found the endpoint unreachable is the
    cause only if it did; otherwise the endpoint answers nobody and the run stops, whatever its size.
    """

    def __init__(self, endpoints_by_role: Mapping[str, str], *, trip_after: int = 3) -> None:
        self.endpoints_by_role = endpoints_by_role
        self.trip_after = trip_after
        self._failed: dict[str, dict[str, str]] = {}
        """Endpoint -> the tasks that found it down since it last answered, with the first detail each."""
        self._answers: dict[str, int] = {}
        """Endpoint -> how many finished tasks got a real answer from it so far."""
        self._first_failed: dict[tuple[str, str], int] = {}
        """(endpoint, task) -> the endpoint's answer count when the task first found it failing."""

    def failed(self, task_id: str, failure: InfrastructureError) -> None:
        """A task's attempt found ``failure.endpoint`` down; `ClusterError` once enough have."""
        if failure.endpoint is None:
            return
        self._first_failed.setdefault((failure.endpoint, task_id), self._answers.get(failure.endpoint, 0))
        seen = self._failed.setdefault(failure.endpoint, {})
        seen.setdefault(task_id, str(failure))
        if len(seen) >= self.trip_after:
            raise self.down(failure.endpoint)

    def down(self, endpoint: str) -> ClusterError:
        """The error that stops the run: ``endpoint`` answers nobody."""
        seen = self._failed.get(endpoint, {})
        first = next(iter(seen.values()), "")
        return ClusterError(
            f"{endpoint} is down: {len(seen)} task(s) failed every retry on it and no task got an answer from it "
            f"meanwhile (first: {first}); nothing is recorded for them: rerun with the same --out once it is back"
        )

    def answered_since_failing(self, task_id: str, endpoint: str) -> bool:
        """Whether ``endpoint`` answered another task after ``task_id`` first found it failing."""
        first = self._first_failed.get((endpoint, task_id))
        return first is not None and self._answers.get(endpoint, 0) > first

    def answered(self, usage_by_role: Mapping[str, Usage]) -> None:
        """A task finished with these calls: every endpoint it really reached (not from a cache) is up."""
        for role, usage in usage_by_role.items():
            endpoint = self.endpoints_by_role.get(role)
            if endpoint is not None and usage.calls > usage.cache_hits:
                self._failed.pop(endpoint, None)
                self._answers[endpoint] = self._answers.get(endpoint, 0) + 1


class CheckGuard:
    """Holds back the records of tasks a check's failure ended until some task shows the check works.

    A check that raises the same exception at the same place (or breaks its contract alike) on every
    candidate of the run's first tasks is broken, not the tasks: `CheckBrokenError` stops the run once
    `first` tasks ended so with no task finishing otherwise (or when the run ends first), and their records
    are not written, so a rerun with the same ``--out`` after the fix redoes them. Once a task finishes
    without a check error, or with another one, the failures depend on the tasks: the held records (and
    every later one) are written as the tasks' own errors.
    """

    def __init__(self, *, first: int = 3) -> None:
        self.first = first
        self.works = False
        self.held: list[tuple[list[bytes], Result]] = []

    def admit(self, frames: list[bytes], result: Result) -> list[tuple[list[bytes], Result]]:
        """The records to write now, this one included or held; `CheckBrokenError` when the check is broken."""
        if self.works:
            return [(frames, result)]
        same = not self.held or _where(self.held[0][1]) == _where(result)
        if result.error_type != "CheckError" or not same:
            self.works = True
            held, self.held = self.held, []
            return [*held, (frames, result)]
        self.held.append((frames, result))
        if len(self.held) >= self.first:
            raise self.broken()
        return []

    def finish(self) -> None:
        """The run ended: held records with no task showing the check works mean it is broken."""
        if self.held and not self.works:
            raise self.broken()

    def broken(self) -> CheckBrokenError:
        first = self.held[0][1]
        where = f" at {first.error_where}" if first.error_where else ""
        return CheckBrokenError(
            f"{first.error} ({where.strip() or 'no traceback'}), on every candidate of the first "
            f"{len(self.held)} task(s), and no task got past it; nothing was recorded for them: fix the check and "
            "rerun with the same --out"
        )


def _where(result: Result) -> tuple[str | None, str | None]:
    return result.error_raised, result.error_where


@dataclass
class Pending:
    """A task out: in its loop (streaming checkpoints into ``frames``), or being graded (``grading``)."""

    task: Task
    """The whole task, gold included (the driver's copy)."""
    slot: int | None
    """The arbiter slot it went to; None for a quarantine arbiter of its own."""
    arbiter: Any
    deadline: float
    attempts: TaskAttempts
    disturbances: int = 0
    """`Fleet.disturbances` when the task was sent."""
    frames: list[bytes] = field(default_factory=list)
    pairs: list[tuple[int, int]] = field(default_factory=list)
    grading: GradeRequest | None = None
    """Set once its loop finished: what its grader is asked."""
    grade_tries: int = 0
    round: int = 0
    """The round its loop is in: one past the last round that landed (for the progress line)."""
    since: float = 0.0
    """When the task was sent or its last round landed (how long its rounds take is the run's speed)."""


def failed_result(task: Task, exc: BaseException) -> Result:
    """The result of a task whose arbiter call failed outright: stop reason ``error``, its cause typed."""
    return error_result(task, describe(exc), error_type(exc))
