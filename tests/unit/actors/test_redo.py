"""The rules for redoing a task the machinery failed under, without Ray: routing round dead members,
replaying finished rounds, bounded attempts, the endpoint breaker, and resuming over old records."""

from __future__ import annotations

import asyncio
import json
from itertools import islice
from pathlib import Path
from typing import Any

import msgspec
import pytest

from redraft.actors._attempts import (
    AttemptPolicy,
    Breaker,
    Pending,
    TaskAttempts,
    by_chance,
    error_result,
    failed_result,
    poison_result,
)
from redraft.actors._clock import RunClock
from redraft.actors._dispatcher import Dispatcher, DispatchRules
from redraft.backends.scripted import ScriptedSpec
from redraft.engine._refine import local_roles
from redraft.engine.arbiter import Arbiter, ArbiterSettings
from redraft.engine.grader import Grader
from redraft.engine.pools import Outcome, Request, RolePool
from redraft.engine.resolution import Cast, RoleSetup
from redraft.errors import BackendUnavailableError, CheckBrokenError, ClusterError, InfrastructureError
from redraft.protocols.messages import Draft, DraftRequest, Message, Result, Task, Usage, encode
from redraft.rundir import RunReader, RunStore
from redraft.scenarios import get_scenario
from redraft.strategies import get_strategy
from tests.support.replies import LateLearner

TASKS = list(islice(get_scenario("arithmetic").tasks(seed=0), 2))


REQUEST = DraftRequest(task=TASKS[0].without_gold(), round=0, sample=0, seed=1)


class Member:
    """A pool member that fails as a member (``fail``), hangs (``delay_s``), or drafts its own name."""

    def __init__(self, name: str, fail: BaseException | None = None, delay_s: float = 0.0) -> None:
        self.name, self.fail, self.delay_s, self.calls = name, fail, delay_s, 0

    async def serve_many(self, requests: list[Request]) -> list[Outcome]:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        if self.fail is not None:
            raise self.fail
        return [Draft(task_id="t", round=0, sample=0, text=self.name) for _ in requests]

    async def answers(self, within_s: float) -> bool:
        return self.fail is None


def call(pool: RolePool) -> Outcome:
    [outcome] = asyncio.run(pool.call_many([REQUEST], [0]))
    return outcome


def dead() -> BaseException:
    import ray.exceptions

    return ray.exceptions.RayActorError()


def test_a_call_routes_round_dead_and_hung_members_to_one_that_answers() -> None:
    pool = RolePool([Member("a", dead()), Member("b", delay_s=5), Member("c")], role="drafter", deadline_s=0.2)
    answered = call(pool)
    assert isinstance(answered, Draft) and answered.text == "c"
    pool.replace(2, None)  # an empty slot is skipped
    failed = call(pool)
    assert isinstance(failed, InfrastructureError)
    assert (failed.role, failed.cause, failed.fault) == ("drafter", "CallTimeoutError", "hung")


def test_a_tasks_own_failure_is_not_routed_round() -> None:
    other = Member("b")
    pool = RolePool([Member("a", ValueError("the check is broken")), other], role="verifier")
    failed = call(pool)
    assert isinstance(failed, ValueError) and "check is broken" in str(failed)
    unavailable = BackendUnavailableError("down (gave up after 5 attempts)", endpoint="openai:gpt-test")
    down = call(RolePool([Member("a", unavailable), other], role="drafter"))
    assert isinstance(down, BackendUnavailableError)  # every member calls the same server: no point
    assert other.calls == 0


def test_a_redone_task_replays_its_finished_rounds_without_calling_a_model() -> None:
    spec = ScriptedSpec(script=LateLearner(fix_at=2))
    settings = ArbiterSettings(samples=2)
    task = TASKS[0].without_gold()

    async def stream(arbiter: Arbiter, replay: list[tuple[Any, Any]]) -> list[Message]:
        trace: list[Message] = []
        pairs: list[tuple[int, int]] = []
        async for checkpoint in arbiter.refine(task, replay=replay):
            trace += checkpoint.messages
            pairs += checkpoint.pairs
        stream.replay = [(trace[q], trace[a]) for q, a in pairs]  # type: ignore[attr-defined]
        return trace

    first = asyncio.run(
        stream(
            Arbiter(local_roles(Cast.of(RoleSetup("arithmetic", spec, spec), get_strategy("adversarial"))), settings),
            [],
        )
    )
    replay = stream.replay  # type: ignore[attr-defined]
    silent = ScriptedSpec(script=[])  # any call raises: nothing may be paid twice
    again = asyncio.run(
        stream(
            Arbiter(
                local_roles(Cast.of(RoleSetup("arithmetic", silent, silent), get_strategy("adversarial"))), settings
            ),
            replay,
        )
    )
    assert again[:-1] == first[:-1]  # the same trace from the replay alone...
    last = [trace[-1] for trace in (first, again)]
    assert all(isinstance(r, Result) for r in last)
    results = [msgspec.structs.replace(r, wall_s=0.0) for r in last]  # type: ignore[type-var]
    assert results[0] == results[1] and results[0].usage.calls > 0  # ...and result, usage included


def test_attempts_are_bounded_and_a_poison_task_says_why() -> None:
    attempts = TaskAttempts()
    died = InfrastructureError("the arbiter died", cause="ActorDiedError")
    for _ in range(AttemptPolicy().max_attempts):
        attempts.failed(died, arbiter_died=True, frames=[], pairs=[])
    assert attempts.fruitless == AttemptPolicy().max_attempts
    assert attempts.arbiter_deaths >= AttemptPolicy().quarantine_after
    poison = poison_result(TASKS[0], attempts)
    assert poison.stop_reason == "error" and poison.error_type == "PoisonTaskError"
    assert poison.attempts == 4 and poison.retried_for == ["ActorDiedError"] * 4
    assert "ActorDiedError x4" in (poison.error or "")
    assert AttemptPolicy().backoff_s(1, died) == 0.0  # a death: elsewhere at once
    assert AttemptPolicy().backoff_s(2, InfrastructureError("hung", cause="CallTimeoutError", fault="hung")) == 2.0


def test_the_breaker_trips_on_an_endpoint_down_for_several_tasks_not_on_one_bad_request() -> None:
    down = InfrastructureError("HTTP 500", cause="BackendUnavailableError", endpoint="openai:gpt-test")
    breaker = Breaker({"drafter": "openai:gpt-test"})
    breaker.failed("t1", down)
    breaker.failed("t1", down)  # the same task again is not more evidence
    breaker.failed("t2", down)
    breaker.answered({"drafter": Usage(calls=1, cache_hits=1)})  # a cached answer proves nothing
    breaker.answered({"drafter": Usage(calls=2)})  # a real answer: the endpoint is up
    breaker.failed("t3", down)
    breaker.failed("t4", down)
    with pytest.raises(ClusterError, match=r"openai:gpt-test is down: 3 task\(s\) failed every retry"):
        breaker.failed("t5", down)


def test_resume_redoes_a_record_of_the_machinerys_failure_and_the_later_record_wins(tmp_path: Path) -> None:
    import ray.exceptions

    manifest = {"fingerprint": "f", "identity": {}}
    store = RunStore.open(tmp_path, manifest)
    lost = failed_result(TASKS[0], ray.exceptions.RayActorError())  # as versions before this one wrote it
    assert lost.error_type == "RayActorError"
    store.append([encode(lost)], lost)
    ok = failed_result(TASKS[1], ValueError("its check raised"))
    store.append([encode(ok)], ok)
    store.finish(1.0)
    again = RunStore.open(tmp_path, manifest)
    assert again.done == {TASKS[1].task_id}  # the machinery's failure is not a finished task
    redone = Result(
        task_id=TASKS[0].task_id, scenario="arithmetic", answer="5", text="Answer: 5", score=1.0, passed=True,
        initial_score=1.0, initial_passed=True, rounds=1, stop_reason="threshold", usage=Usage(calls=1), wall_s=1.0,
    )  # fmt: skip
    again.append([encode(redone)], redone)
    summary = again.finish(1.0)
    assert summary.tasks == 2 and summary.passed == 1 and summary.errors == {"ValueError": 1}
    entries = list(RunReader(tmp_path).entries())
    assert [e.task_id for e in entries] == [TASKS[1].task_id, TASKS[0].task_id]
    assert entries[1].result.passed and len((tmp_path / "results.jsonl").read_text().splitlines()) == 3
    assert json.loads((tmp_path / "summary.json").read_text())["tasks"] == 2


class StubFleet:
    """What the dispatcher asks of a fleet when a task lands: how disturbed it has been, and a grader."""

    def __init__(self) -> None:
        self.key = "run"
        self.disturbances = 0
        self.graders = [Grader("arithmetic")]

    def release(self, handle: object) -> None:
        pass


class Written:
    def __init__(self) -> None:
        self.results: list[Result] = []

    def append(self, frames: list[bytes], result: Result) -> None:
        self.results.append(result)


def land_timed_out(dispatcher: Dispatcher, fleet: StubFleet, attempts: TaskAttempts, *, disturbed: bool) -> None:
    """One attempt of a task that its own timeout stopped lands, with a member disturbed meanwhile or not."""
    task = TASKS[0]
    pending = Pending(task, 0, None, deadline=1e9, attempts=attempts, disturbances=fleet.disturbances)
    fleet.disturbances += disturbed  # a member killed, dead or restarted while the task was out
    stopped = msgspec.structs.replace(
        error_result(task, "", ""), stop_reason="budget", stop_limit="task_timeout", error=None, error_type=None
    )
    dispatcher._done(pending, [encode(task.without_gold()), encode(stopped)])


@pytest.mark.parametrize("disturbed", [False, True])
def test_a_timeout_while_a_member_was_restarted_is_redone_until_the_last_attempt(disturbed: bool) -> None:
    fleet, store = StubFleet(), Written()
    dispatcher = Dispatcher(
        fleet,  # type: ignore[arg-type]
        store,  # type: ignore[arg-type]
        DispatchRules(get_scenario("arithmetic"), max_in_flight=1),
        clock=RunClock(started=0.0),
    )
    if not disturbed:  # the task's own time, spent: written as it ended
        land_timed_out(dispatcher, fleet, TaskAttempts(), disturbed=False)
        assert [r.stop_limit for r in store.results] == ["task_timeout"] and not dispatcher.retries
        return
    attempts, last = TaskAttempts(), AttemptPolicy().max_attempts
    for number in range(1, last):  # disturbed on every attempt: each but the last goes back to the queue
        land_timed_out(dispatcher, fleet, attempts, disturbed=True)
        assert store.results == [] and len(dispatcher.retries) == 1  # not written
        _at, _seq, again, attempts = dispatcher.retries.pop()
        assert again is TASKS[0] and attempts.causes == ["CallTimeoutError"] * number
    land_timed_out(dispatcher, fleet, attempts, disturbed=True)
    assert [r.stop_limit for r in store.results] == ["task_timeout"]  # a budget stop, not a poison task
    assert store.results[0].attempts == last
    assert store.results[0].retried_for == ["CallTimeoutError"] * (last - 1)


# ---------------------------------------------------------------- whose fault, by evidence


def a_dispatcher(store: Written, now: list[float] | None = None, stall_window: float | None = None) -> Dispatcher:
    """A dispatcher over a stub fleet; its clock reads ``now[0]`` when given."""
    clock = RunClock(started=0.0) if now is None else RunClock(started=0.0, now=lambda: now[0])
    return Dispatcher(
        StubFleet(),  # type: ignore[arg-type]
        store,  # type: ignore[arg-type]
        DispatchRules(get_scenario("arithmetic"), max_in_flight=2, stall_window=stall_window),
        clock=clock,
        breaker=Breaker({"drafter": "openai-compatible:m@http://127.0.0.1:9/v1"}),
    )


def fail_unreachable(dispatcher: Dispatcher, task: Any, attempts: TaskAttempts) -> None:
    """One attempt of ``task`` ends with the endpoint unreachable (the retry layer gave up on it)."""
    down = InfrastructureError(
        "HTTP connect refused on every attempt",
        cause="BackendUnavailableError",
        fault="unreachable",
        endpoint="openai-compatible:m@http://127.0.0.1:9/v1",
    )
    dispatcher._failed(Pending(task, 0, None, deadline=1e9, attempts=attempts), down)


def test_a_server_down_for_a_small_run_stops_it_and_records_no_task_as_failed() -> None:
    """Two tasks, an endpoint that answers nobody: before, both were written as poison tasks after 4 attempts
    each (exit 0), and a rerun skipped them for good; the breaker's count of 3 tasks was never reached."""
    store = Written()
    dispatcher = a_dispatcher(store)
    attempts = {task.task_id: TaskAttempts() for task in TASKS}
    with pytest.raises(ClusterError, match=r"openai-compatible:m@http://127\.0\.0\.1:9/v1 is down"):
        for _ in range(AttemptPolicy().max_attempts):
            for task in TASKS:
                fail_unreachable(dispatcher, task, attempts[task.task_id])
    assert store.results == []


def test_a_task_the_endpoint_fails_while_it_answers_others_is_the_tasks_own_error() -> None:
    store = Written()
    dispatcher = a_dispatcher(store)
    attempts = TaskAttempts()
    fail_unreachable(dispatcher, TASKS[0], attempts)
    dispatcher.breaker.answered({"drafter": Usage(calls=3)})  # another task got its answers meanwhile
    for _ in range(AttemptPolicy().max_attempts - 1):
        fail_unreachable(dispatcher, TASKS[0], attempts)
    [record] = store.results
    assert (record.stop_reason, record.error_type) == ("error", "TaskRefusedError")
    assert record.retried_for == ["BackendUnavailableError"] * AttemptPolicy().max_attempts
    assert "while it answered other tasks" in (record.error or "")


def fail_died(dispatcher: Dispatcher, task: Any, attempts: TaskAttempts, rounds: int = 0) -> None:
    """One attempt of ``task`` ends with an actor under it dead, after ``rounds`` finished rounds (of the task's
    trace: each a request and its reply)."""
    died = InfrastructureError("the drafter's model host died", cause="ActorDiedError", role="drafter")
    frames = [encode(TASKS[0].without_gold())] + [
        b"request %d" % k if k % 2 == 0 else b"reply" for k in range(2 * rounds)
    ]
    pairs = [(1 + 2 * k, 2 + 2 * k) for k in range(rounds)]
    pending = Pending(task, 0, None, deadline=1e9, attempts=attempts, frames=frames, pairs=pairs)
    dispatcher._failed(pending, died)


def test_tasks_dying_while_nothing_succeeds_are_redone_until_the_stall_window_then_the_run_stops() -> None:
    """A shared actor every task needs died for good: before, the run stopped once one task's 4 attempts failed
    with no task finished meanwhile, which a storm of kills also does to a healthy run (0 of 300 tasks). Now
    nothing is recorded and the tasks are redone until nothing has succeeded for the stall window."""
    store, now = Written(), [0.0]
    dispatcher = a_dispatcher(store, now, stall_window=30.0)
    attempts = {task.task_id: TaskAttempts() for task in TASKS}
    for _ in range(3 * AttemptPolicy().max_attempts):  # far past the attempts of one task
        for task in TASKS:
            fail_died(dispatcher, task, attempts[task.task_id])
        now[0] += 2.0
        dispatcher.stall.check()  # 24 s in: within the window
    assert store.results == [] and len(dispatcher.retries) == 3 * AttemptPolicy().max_attempts * len(TASKS)
    now[0] = 30.5
    with pytest.raises(ClusterError, match=r"nothing succeeded for 30 s .* ActorDiedError \(drafter\) x24;") as raised:
        dispatcher.stall.check()
    assert "\n" not in str(raised.value) and "rerun with the same --out" in str(raised.value)
    assert store.results == []


def test_the_stall_window_follows_the_slowest_round_and_starts_again_at_each_success() -> None:
    store, now = Written(), [0.0]
    dispatcher = a_dispatcher(store, now)
    stall = dispatcher.stall
    assert stall.window() == stall.floor_s  # nothing measured yet
    stall.succeeded(round_s=40.0)
    assert stall.window() == 400.0  # 10 slowest rounds
    fail_died(dispatcher, TASKS[0], TaskAttempts())
    now[0] = 399.0
    stall.check()  # within the window
    stall.succeeded()  # a task finished: the clock starts again
    now[0] = 900.0
    stall.check()  # nothing failed since: a slow run, not a stalled one
    fail_died(dispatcher, TASKS[0], TaskAttempts())
    with pytest.raises(ClusterError, match=r"nothing succeeded for 501 s \(.*stall window 400 s\)"):
        stall.check()


def test_a_task_that_finishes_a_round_between_deaths_is_never_a_poison_task() -> None:
    """Under a storm of kills a task dies again and again, but resumes from its last finished round each time:
    each attempt that finished one more round does not count against it."""
    store = Written()
    dispatcher = a_dispatcher(store)
    attempts = TaskAttempts()
    for rounds in range(1, 3 * AttemptPolicy().max_attempts):
        fail_died(dispatcher, TASKS[0], attempts, rounds=rounds)
        dispatcher.stall.succeeded()  # others finish meanwhile
    assert store.results == [] and attempts.fruitless == 0 and attempts.arbiter_deaths == 0
    for _ in range(AttemptPolicy().max_attempts):  # then it kills whatever runs it, with no round more
        fail_died(dispatcher, TASKS[0], attempts, rounds=3 * AttemptPolicy().max_attempts - 1)
        dispatcher.stall.succeeded()
    [record] = store.results
    assert record.error_type == "PoisonTaskError"


def test_a_task_dying_where_others_finish_is_a_poison_task() -> None:
    store = Written()
    dispatcher = a_dispatcher(store)
    attempts = TaskAttempts()
    fail_died(dispatcher, TASKS[0], attempts)
    dispatcher.stall.succeeded()  # another task finished meanwhile
    for _ in range(AttemptPolicy().max_attempts - 1):
        fail_died(dispatcher, TASKS[0], attempts)
    [record] = store.results
    assert (record.stop_reason, record.error_type) == ("error", "PoisonTaskError")
    assert record.retried_for == ["ActorDiedError"] * AttemptPolicy().max_attempts


def storm_elsewhere(dispatcher: Dispatcher, *, tasks: int, failures: int, successes: int) -> None:
    """The rest of a run of ``tasks`` tasks: the machinery failed ``failures`` attempts of the others and
    ``successes`` rounds, tasks and grades succeeded."""
    dispatcher.written = tasks - 1
    dispatcher.stall.failures += failures
    dispatcher.stall.successes += successes


def test_a_task_dying_four_times_in_a_storm_that_kills_a_quarter_of_attempts_is_redone_not_poison() -> None:
    """Under a storm of kills a task can die four times in a row by chance (at one attempt in four failing,
    about one task in 256): before, it was recorded as a poison task after four, an error the task did not
    cause. Now it is redone until so many deaths in a row are no longer chance for any task of the run."""
    store = Written()
    dispatcher = a_dispatcher(store)
    storm_elsewhere(dispatcher, tasks=300, failures=100, successes=300)
    attempts = TaskAttempts()
    for _ in range(AttemptPolicy().max_attempts):
        fail_died(dispatcher, TASKS[0], attempts)
        dispatcher.stall.succeeded()  # others finish meanwhile
    assert store.results == [] and attempts.fruitless == AttemptPolicy().max_attempts
    assert by_chance(attempts, dispatcher.stall, 300) > AttemptPolicy().luck  # ~1.2 tasks of 300 by chance
    while not store.results:
        dispatcher.retries.clear()
        fail_died(dispatcher, TASKS[0], attempts)
        dispatcher.stall.succeeded()
    [record] = store.results
    assert record.error_type == "PoisonTaskError"
    # 300 x (100/404)^k < 0.01 first at k = 8: then it dies where others do not, beyond chance
    assert attempts.fruitless == 8 and len(record.retried_for) == 8


def test_a_task_that_keeps_dying_in_a_storm_that_kills_most_attempts_is_poison_at_the_most_attempts() -> None:
    store = Written()
    dispatcher = a_dispatcher(store)
    storm_elsewhere(dispatcher, tasks=300, failures=9_000, successes=1_000)
    attempts = TaskAttempts()
    while not store.results:
        dispatcher.retries.clear()
        fail_died(dispatcher, TASKS[0], attempts)
        dispatcher.stall.succeeded()
    assert attempts.fruitless == AttemptPolicy().most_attempts  # the bound on what one task may cost


def test_a_poison_record_written_by_count_for_an_unreachable_endpoint_is_redone_on_resume(tmp_path: Path) -> None:
    manifest = {"fingerprint": "f", "identity": {}}
    store = RunStore.open(tmp_path, manifest)
    by_count = msgspec.structs.replace(
        error_result(TASKS[0], "PoisonTaskError: ... (BackendUnavailableError x4)", "PoisonTaskError"),
        attempts=4,
        retried_for=["BackendUnavailableError"] * 4,
    )
    died = msgspec.structs.replace(
        error_result(TASKS[1], "PoisonTaskError: ... (ActorDiedError x4)", "PoisonTaskError"),
        attempts=4,
        retried_for=["ActorDiedError"] * 4,
    )
    for record in (by_count, died):
        store.append([encode(record)], record)
    store.finish(1.0)
    assert RunStore.open(tmp_path, manifest).done == {TASKS[1].task_id}  # only the real poison task stays done


# ---------------------------------------------------------------- a check that raises


def check_failed(task_id: str, raised: str = "KeyError", where: str = "mycheck.py:5 in boom") -> Result:
    task = Task(task_id=task_id, scenario="check:mycheck:boom", prompt="?")
    error = f"CheckError: the check of check:mycheck:boom raised {raised}: 'gold'"
    return msgspec.structs.replace(
        error_result(task, error, "CheckError"), error_raised=raised, error_where=where, traceback="Traceback ..."
    )


def finished(task_id: str) -> Result:
    return msgspec.structs.replace(error_result(TASKS[0], "", ""), task_id=task_id, stop_reason="threshold", error=None)


def test_a_check_that_raises_alike_on_the_first_tasks_stops_the_run_and_records_none_of_them() -> None:
    """Before, each such task was written as a failed check, exit 0, after every model call was paid."""
    store = Written()
    dispatcher = a_dispatcher(store)
    dispatcher._write([], check_failed("a"))
    dispatcher._write([], check_failed("b"))
    assert store.results == []  # held: no task has shown the check works yet
    with pytest.raises(CheckBrokenError, match=r"raised KeyError: 'gold' \(at mycheck\.py:5 in boom\), on every"):
        dispatcher._write([], check_failed("c"))
    assert store.results == []  # a rerun with the same --out redoes them, once the check is fixed


def test_a_run_shorter_than_the_guard_whose_every_task_the_check_failed_is_stopped_at_its_end() -> None:
    store = Written()
    dispatcher = a_dispatcher(store)
    dispatcher._write([], check_failed("a"))
    with pytest.raises(CheckBrokenError):
        dispatcher.check_guard.finish()
    assert store.results == []


def test_check_failures_that_depend_on_the_task_are_the_tasks_own_errors() -> None:
    store = Written()
    dispatcher = a_dispatcher(store)
    dispatcher._write([], check_failed("a"))
    dispatcher._write([], finished("b"))  # the check works on some input: "a" was the task's own
    dispatcher._write([], check_failed("c"))
    dispatcher.check_guard.finish()
    assert [r.task_id for r in store.results] == ["a", "b", "c"]
    other = Written()
    mixed = a_dispatcher(other)
    mixed._write([], check_failed("a"))
    mixed._write([], check_failed("b", raised="ValueError", where="mycheck.py:9 in boom"))  # not one bug
    assert [r.task_id for r in other.results] == ["a", "b"]


def test_the_end_table_counts_check_errors_by_what_and_where_they_raised() -> None:
    from redraft.rundir.summary import summarize
    from redraft.views.summary_table import summary_rows

    summary = summarize([check_failed("a"), check_failed("b"), finished("c")], wall_s=1.0)
    assert summary.check_errors == {"KeyError at mycheck.py:5 in boom": 2}
    rows = dict(summary_rows(summary, breakdowns=True))
    assert rows["check raised"].startswith("KeyError at mycheck.py:5 in boom 2")
