"""``plan_execute`` on pipeline cases, in-process with scripted drafters and the real sandbox: a quirk found at
step 2 revises the plan and keeps the verified prefix; a step that keeps failing stalls the round; a program
that hunts for the gold finds none; a task cut short after a verified step resumes from it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from redraft.backends.scripted import ScriptedSpec
from redraft.engine._refine import local_roles
from redraft.engine.arbiter import Arbiter, ArbiterSettings
from redraft.engine.resolution import Cast, RoleSetup, check_plans
from redraft.errors import UserError
from redraft.protocols.convergence import ConvergenceConfig
from redraft.protocols.messages import (
    Decision,
    Message,
    PlanVersion,
    Result,
    Task,
    Verification,
    VerifyRequest,
)
from redraft.scenarios import get_scenario
from redraft.scenarios.builtin._pipeline_data import make_case
from redraft.strategies import get_strategy
from tests.support.harness import run_task, wire
from tests.support.plan_scripts import Discovering, Stalling, attacking

PIPELINE = get_scenario("pipeline")
TASK = list(PIPELINE.tasks(seed=0))[4]  # difficulty 1, its one quirk: dates in several formats in orders.csv


def result(trace: list[Message]) -> Result:
    assert isinstance(trace[-1], Result)
    return trace[-1]


def plans(trace: list[Message]) -> list[PlanVersion]:
    return [m for m in trace if isinstance(m, PlanVersion)]


def step_runs(trace: list[Message]) -> list[str]:
    """The output of each step run, in order."""
    return [m.step.step.output for m in trace if isinstance(m, VerifyRequest) and m.step is not None]


def test_a_quirk_seen_at_step_2_revises_the_plan_and_the_verified_prefix_is_kept() -> None:
    assert "csv_date_formats" in make_case(TASK.gold["seed"], TASK.gold["difficulty"]).quirks
    script = Discovering()
    trace = run_task(TASK, script, strategy="plan_execute", samples=1, max_rounds=1)
    first, second = plans(trace)
    assert [s.output for s in first.steps] == ["inventory.csv", "gathered.csv", "output.csv"]
    assert first.version == 1 and first.trigger_step is None and first.added == [1, 2, 3]
    # The revision: triggered by step 2's observation, which counted dates in more than one format.
    assert second.version == 2 and second.trigger_step == 2
    assert second.observation is not None and second.observation.files == {}
    dates = next(c for c in second.observation.columns if c.name == "order_date")
    assert "YYYY-MM-DD" in dates.patterns and len(set(dates.patterns) - {"empty"}) > 1
    assert [s.output for s in second.steps] == ["inventory.csv", "gathered.csv", "normalised.csv", "output.csv"]
    assert (second.added, second.removed, second.changed, second.kept) == ([3], [], [4], [1, 2])
    # Steps 1 and 2 ran once: the revision kept them; the new step and the output ran after it.
    assert step_runs(trace) == ["inventory.csv", "gathered.csv", "normalised.csv", "output.csv"]
    assert script.asks.count("plan") == 1 and script.asks.count("step gathered.csv") == 1
    final = result(trace)
    assert final.passed and final.stop_reason == "threshold"
    assert final.usage.calls == len(script.asks)
    grade = PIPELINE.grade(TASK, final.text)  # the verified steps, run together as one program
    assert grade is not None and grade.passed and grade.score == 1.0, grade


def test_without_the_revision_the_output_step_fails_its_date_contract_and_the_task_is_not_solved() -> None:
    """The control: a drafter that never revises cannot get the ISO-only table past the output's contract."""

    def never_revises(request: Any) -> str:
        text = Discovering()(request)
        return '{"action": "continue", "reason": "fine"}' if '"revise"' in text else text

    trace = run_task(TASK, never_revises, strategy="plan_execute", samples=1, max_rounds=1)
    assert len(plans(trace)) == 1
    outputs = [
        m for m in trace if isinstance(m, Verification) and m.observation and m.observation.output == "output.csv"
    ]
    assert len(outputs) >= 2 and not any(v.passed for v in outputs)
    assert all(any(c.name == "type:order_date" and not c.passed for c in v.checks) for v in outputs)
    assert not result(trace).passed
    grade = PIPELINE.grade(TASK, result(trace).text)
    assert grade is not None and not grade.passed


def test_a_step_that_keeps_failing_stalls_the_round_within_its_moves() -> None:
    script = Stalling()
    trace = run_task(TASK, script, strategy="plan_execute", samples=1, max_rounds=1)
    final = result(trace)
    assert not final.passed and final.stop_reason == "max_rounds"
    # The plan, then programs and decisions until six moves in a row verified nothing.
    assert script.asks[0] == "plan" and len(script.asks) == 1 + 6
    assert script.asks[1:] == ["step", "step", "decide", "step", "step", "decide"]
    failed = [m for m in trace if isinstance(m, Verification) and m.observation is not None]
    assert failed and all(not v.passed for v in failed)
    assert all("cannot read the files yet" in v.observation.stderr_tail for v in failed if v.observation)


def test_a_program_that_hunts_for_the_gold_or_a_way_out_finds_neither() -> None:
    trace = run_task(TASK, attacking, strategy="plan_execute", samples=1, max_rounds=1)
    [run] = [m for m in trace if isinstance(m, Verification) and m.observation is not None]
    assert run.observation is not None and run.observation.written
    found = run.observation.files["output.csv"].decode()
    assert "imported redraft" not in found and "imported tests" not in found
    assert "network: open" not in found and "network: " in found
    gold = make_case(TASK.gold["seed"], TASK.gold["difficulty"])
    hidden_rows = [",".join(row) for row in gold.gold_rows if row[0] not in {e[0] for e in gold.examples}]
    assert not [row for row in hidden_rows if row in found]
    assert str(TASK.gold["seed"]) not in found
    assert all(not isinstance(m, Task) or not m.gold for m in trace)  # the loop never held the gold


def test_a_task_cut_after_a_verified_step_resumes_from_it_and_pays_only_for_the_rest() -> None:
    settings = ArbiterSettings(strategy="plan_execute", samples=1, convergence=ConvergenceConfig(max_rounds=1))

    def arbiter(script: Discovering) -> Arbiter:
        setup = RoleSetup(scenario="pipeline", drafter=ScriptedSpec(script=script), critic=ScriptedSpec(script=script))
        return Arbiter(local_roles(Cast.of(setup, get_strategy("plan_execute"))), settings)

    async def cut_after_step_2() -> tuple[list[Message], list[tuple[int, int]]]:
        messages: list[Message] = []
        pairs: list[tuple[int, int]] = []
        async for checkpoint in arbiter(Discovering()).refine(TASK.without_gold()):
            messages += checkpoint.messages
            pairs += checkpoint.pairs
            assert not checkpoint.last
            if "gathered.csv" in [out for out, ok in verified_steps(messages) if ok]:
                return messages, pairs  # the node dies here: the checkpoints so far reached the driver
        raise AssertionError("step 2 was never checkpointed")

    messages, pairs = asyncio.run(cut_after_step_2())
    replay = [(messages[q], messages[a]) for q, a in pairs]
    again = Discovering()

    async def redo() -> list[Message]:
        return [m async for c in arbiter(again).refine(TASK.without_gold(), replay=replay) for m in c.messages]

    trace = wire(asyncio.run(redo()))
    final = result(trace)
    assert final.passed
    # Paid again: only what came after step 2's checkpoint (its decision, the revision's steps).
    assert "plan" not in again.asks and "step inventory.csv" not in again.asks
    assert "step gathered.csv" not in again.asks
    assert again.asks[0] == "decide" and "step normalised.csv" in again.asks
    assert final.usage.calls == 4 + len(again.asks)  # the plan, 2 programs, 1 decision replayed: counted as made
    assert step_runs(trace) == ["inventory.csv", "gathered.csv", "normalised.csv", "output.csv"]
    assert [m.action for m in trace if isinstance(m, Decision)] == ["stop"]


def verified_steps(messages: list[Message]) -> list[tuple[str, bool]]:
    return [
        (m.observation.output, m.passed) for m in messages if isinstance(m, Verification) and m.observation is not None
    ]


def test_a_scenario_without_files_is_refused_for_plan_execute_before_anything_starts() -> None:
    with pytest.raises(UserError, match="plan_execute runs each step of a plan over the task's files"):
        check_plans(get_strategy("plan_execute"), get_scenario("arithmetic"))
    check_plans(get_strategy("plan_execute"), PIPELINE)
    check_plans(get_strategy("adversarial"), get_scenario("arithmetic"))
