"""An arbiter's model-call figures reach Ray summed by series: every increment counted, once, soon."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import msgspec
import pytest

from redraft.actors import _metrics as metrics
from redraft.actors._metrics import ModelMetrics
from redraft.protocols.messages import Usage


class Recorded:
    """Stands in for Ray's counters: what was recorded, by (name, tags), and how many records."""

    def __init__(self) -> None:
        self.totals: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()
        self.records = 0

    def metric(self, kind: str, name: str, description: str, keys: tuple[str, ...]) -> Any:
        assert kind == "counter"
        return FakeCounter(self, name, keys)


class FakeCounter:
    def __init__(self, recorded: Recorded, name: str, keys: tuple[str, ...]) -> None:
        self.recorded, self.name, self.keys = recorded, name, keys

    def inc(self, amount: float, tags: dict[str, str]) -> None:
        assert set(tags) == {"run", *self.keys}  # what Ray would refuse
        self.recorded.totals[self.name, tuple(sorted(tags.items()))] += amount
        self.recorded.records += 1


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Recorded:
    fake = Recorded()
    monkeypatch.setattr(metrics, "_metric", fake.metric)
    return fake


def recording(run: str = "run-1") -> ModelMetrics:
    figures = ModelMetrics(run)
    figures._on = True  # outside Ray nothing is recorded; these tests stand in for Ray's counters
    return figures


def key(name: str, **tags: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted({"run": "run-1", **tags}.items()))


def test_calls_are_summed_by_series_and_recorded_once_at_the_end_of_a_task(recorded: Recorded) -> None:
    async def task() -> None:
        figures = recording()
        for _ in range(10):
            figures.call("drafter", "m", Usage(input_tokens=5, output_tokens=2, calls=1, cost_usd=0.5))
        figures.call("critic", "m", Usage(input_tokens=1, output_tokens=1, calls=1, cache_hits=1))
        assert recorded.records == 0  # nothing yet: the increments wait for the flush
        figures.flush()

    asyncio.run(task())
    assert recorded.totals[key("redraft_model_calls", role="drafter", model="m")] == 10
    assert recorded.totals[key("redraft_model_tokens", role="drafter", model="m", direction="input")] == 50
    assert recorded.totals[key("redraft_model_tokens", role="drafter", model="m", direction="output")] == 20
    assert recorded.totals[key("redraft_model_cost_usd", role="drafter", model="m")] == 5.0
    assert recorded.totals[key("redraft_model_cache_hits", role="critic", model="m")] == 1
    assert key("redraft_model_cache_hits", role="drafter", model="m") not in recorded.totals  # zeros skipped
    assert recorded.records == 8  # one per series, not 4 or 5 per call


def test_a_long_task_s_calls_are_recorded_within_the_flush_interval(
    recorded: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ModelMetrics, "FLUSH_S", 0.05)

    async def task() -> None:
        figures = recording()
        figures.call("drafter", "m", Usage(input_tokens=3, output_tokens=1, calls=1))
        await asyncio.sleep(0.2)  # no task ended: the timer recorded it
        assert recorded.totals[key("redraft_model_calls", role="drafter", model="m")] == 1
        figures.call("drafter", "m", Usage(input_tokens=3, output_tokens=1, calls=1))
        figures.flush()
        figures.flush()  # nothing pending: nothing recorded twice

    asyncio.run(task())
    assert recorded.totals[key("redraft_model_calls", role="drafter", model="m")] == 2
    assert recorded.totals[key("redraft_model_tokens", role="drafter", model="m", direction="input")] == 6


def test_without_a_run_nothing_is_recorded(recorded: Recorded) -> None:
    async def task() -> None:
        figures = ModelMetrics("")
        figures.call("drafter", "m", Usage(input_tokens=3, calls=1))
        figures.flush()

    asyncio.run(task())
    assert recorded.records == 0


def test_a_judged_task_s_judge_calls_are_recorded_under_role_judge_priced_as_its_usage(recorded: Recorded) -> None:
    from redraft.actors._attempts import Pending, TaskAttempts, error_result
    from redraft.actors._clock import RunClock
    from redraft.actors._grading import GradeStage
    from redraft.actors._metrics import RunMetrics
    from redraft.protocols.messages import CandidateGrade, Grade, Task, encode

    task = Task(task_id="t", scenario="cited_answer", prompt="?")
    figures = RunMetrics("run-1")
    figures._on = True
    written: list[Any] = []
    stage = GradeStage(None, RunClock(started=0.0), {}, lambda f, r: written.append(r), metrics=figures)  # type: ignore[arg-type]
    loop = error_result(task, "", "")
    pending = Pending(task, 0, None, deadline=1e9, attempts=TaskAttempts(), frames=[encode(task), encode(loop)])
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, calls=3)
    grade = Grade(task_id="t", grades=[CandidateGrade(round=0, sample=0, score=1.0, passed=True)], judge="gpt-4o")
    stage.written(pending, msgspec.structs.replace(grade, usage=usage))
    [result] = written
    judge = result.usage_by_role["judge"]
    assert judge.cost_usd > 0  # priced by the built-in table
    assert recorded.totals[key("redraft_model_calls", role="judge", model="gpt-4o")] == 3
    assert recorded.totals[key("redraft_model_cost_usd", role="judge", model="gpt-4o")] == judge.cost_usd
    assert recorded.totals[key("redraft_model_tokens", role="judge", model="gpt-4o", direction="input")] == 1_000_000
    stage.written(pending, grade)  # a program's grade (no judge calls): nothing recorded
    assert recorded.records == 4
