"""A judge under ``--batch``: its calls count as a batchable model's, its grader waits for its batch with no deadline
of its own (nor the grade stage's watchdog), and the estimate prices its calls at the batch price.
(Its calls through a provider's batch API on a real Ray, and a resume: tests/integration/test_judge_batches_on_ray.py.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from pathlib import Path

import pytest

import redraft
from redraft import RunConfig
from redraft.actors._batches import Batches
from redraft.actors._grading import GRADE_WATCHDOG_S
from redraft.backends import ChatRequest, Completion, ScriptedSpec
from redraft.backends.base import Backend
from redraft.engine.resolution import grader_constructor, resolve_run
from redraft.errors import UserError
from redraft.judging.grading import JUDGE_DEADLINE_S, JudgeGrader
from redraft.judging.rubric import rubric_of
from redraft.protocols.messages import CandidateText, GradeRequest, Task
from tests.support import judges

LOCAL = "scripted:tests.support.judges:faithful"
JUDGE = "openai:gpt-4o"


@pytest.fixture
def rubric(tmp_path: Path) -> str:
    path = tmp_path / "test.json"
    path.write_text(json.dumps(judges.RUBRIC))
    return str(path)


@pytest.fixture(autouse=True)
def openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def test_batch_is_accepted_when_only_the_judge_has_a_batch_api_and_refused_naming_it_when_it_has_none(
    rubric: str,
) -> None:
    judged = resolve_run(RunConfig.build(scenario="arithmetic", model=LOCAL, judge=JUDGE, rubric=rubric, batch=True))
    assert judged.setup.judge is not None and judged.setup.judge.spec == JUDGE
    compatible = "openai-compatible:m@http://127.0.0.1:9/v1"
    config = RunConfig.build(scenario="arithmetic", model=LOCAL, judge=compatible, rubric=rubric, batch=True)
    with pytest.raises(UserError, match=r"this run's models \(.*openai-compatible:m@.*\) have none"):
        resolve_run(config)


def test_a_judge_through_its_batches_is_made_without_a_deadline_and_the_grade_stage_waits_for_it(rubric: str) -> None:
    setup = resolve_run(RunConfig.build(scenario="arithmetic", model=LOCAL, judge=JUDGE, rubric=rubric)).setup
    assert setup.judge is not None and not setup.judge.batched
    _, args, online = grader_constructor(setup)
    assert "deadline_s" not in online and args[0] is setup.judge.backend  # online: the judge's own deadline
    batched = setup.judge.through_batches(ScriptedSpec(script=judges.faithful, spec=JUDGE))
    cls, args, kwargs = grader_constructor(dataclasses.replace(setup, judge=batched))
    assert cls is JudgeGrader and kwargs["deadline_s"] is None and args[0] is batched.backend
    assert Batches([], judged=True).grade_watchdog_s == math.inf
    assert Batches([]).grade_watchdog_s == GRADE_WATCHDOG_S > JUDGE_DEADLINE_S


class Gated:
    """A judge's backend whose answer waits for the test to release it, as a call waits for its batch."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(self, request: ChatRequest) -> Completion:
        self.asked.set()
        await self.release.wait()
        return await ScriptedSpec(script=judges.faithful).create().complete(request)


def test_a_judge_without_a_deadline_waits_for_its_answer_however_long_it_takes() -> None:
    gated = Gated()

    class GatedSpec(ScriptedSpec):
        def create(self) -> Backend:
            return gated

    grader = JudgeGrader(GatedSpec(script=judges.faithful), rubric_of(judges.RUBRIC), deadline_s=None, cache=False)
    request = GradeRequest(
        task=Task(task_id="t", scenario="arithmetic", prompt="2 + 2?"),
        candidates=[CandidateText(round=0, sample=0, text="4 CORRECT")],
    )

    async def graded() -> list[float | None]:
        grading = asyncio.create_task(grader.grade(request))
        await gated.asked.wait()
        assert not grading.done()  # waiting for its batch
        gated.release.set()
        grade = await grading
        assert grade.error is None and grade.usage.calls == 1
        return [g.score for g in grade.grades]

    assert asyncio.run(graded()) == [1.0]


def test_the_estimate_prices_the_judge_s_calls_at_the_batch_price_under_batch(rubric: str) -> None:
    online = RunConfig.build(scenario="arithmetic", model=LOCAL, judge=JUDGE, rubric=rubric, limit=4, max_rounds=2)
    made, batched = redraft.estimate(online), redraft.estimate(online.replace(batch=True))
    judge, judge_batched = made.worst.by_role["judge"], batched.worst.by_role["judge"]
    assert judge_batched.calls == judge.calls == judge_batched.batch_calls > 0 and judge.batch_calls == 0
    assert judge.cost_usd > 0 and judge_batched.cost_usd == pytest.approx(judge.cost_usd / 2)
    assert any(line.endswith("at the batch price (--batch)") for line in batched.assumptions)
    assert not any("batch price" in line for line in made.assumptions)
    compatible = online.replace(judge="openai-compatible:gpt-4o@http://127.0.0.1:9/v1", drafter=JUDGE)
    without = redraft.estimate(compatible.replace(batch=True)).worst.by_role["judge"]
    assert without.batch_calls == 0  # a judge with no batch API is made online, at the online price
