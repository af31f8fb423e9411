"""A comparison of a user's check with no held-out grade rests on the feedback, and says so: before, every
figure was nan%, each arm's baselines were "held at 0", and the gate could not read its own comparison.json."""

from __future__ import annotations

import asyncio
import io
import math
from pathlib import Path

import pytest
from rich.console import Console

from redraft import RunConfig, Task
from redraft.backends.base import ChatRequest
from redraft.cli._compare import print_table
from redraft.comparison._analysis import Comparison
from redraft.comparison._arms import Arm
from redraft.comparison._result import build, read_json, regressions, write_json
from redraft.comparison._runner import BASELINE, ComparePlan
from redraft.engine._refine import refine_trace
from redraft.engine.grader import Grader
from redraft.engine.resolution import arbiter_settings
from redraft.errors import UserError
from redraft.protocols.messages import Result, encode
from redraft.rundir import RunStore
from tests.support.harness import scripted_arbiter
from tests.support.replies import is_critique, round_of
from tests.support.resolved import manifest_for

CHECK = "check:tests.support.check_modules:exact_answer"
TASKS = [
    Task(task_id=f"t{i}", scenario=CHECK, prompt=f"What is {i} + 1?", reference={"answer": str(i + 1)})
    for i in range(6)
]


def model(request: ChatRequest) -> str:
    """Right on even tasks from the start, on odd ones only once revised."""
    if is_critique(request):
        return '{"issues": []}'
    prompt = request.messages[-1].content
    number = next(int(w.rstrip("?")) for w in prompt.split() if w.rstrip("?").isdigit() and w != "1")
    right = number % 2 == 0 or round_of(request) >= 1
    return f"Answer: {number + 1 if right else number}"


def lane(root: Path, config: RunConfig, tasks: list[Task] = TASKS) -> None:
    store = RunStore.open(root, manifest_for(config, root.name))
    arbiter = scripted_arbiter(model, arbiter_settings(config), scenario=CHECK)
    for task in tasks:
        trace = asyncio.run(refine_trace(arbiter, Grader(CHECK), task))
        result = trace[-1]
        assert isinstance(result, Result) and result.graded_pass is None  # nothing held out
        store.append([encode(m) for m in trace], result)
    store.finish(1.0)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Comparison, Path]:
    out = tmp_path_factory.mktemp("feedback")
    base = RunConfig.build(scenario=CHECK, samples=2, max_rounds=2)
    plan = ComparePlan(base=base, arms=[Arm(name="adversarial", settings={})], out=out, baseline_samples=3)
    for planned in plan.lanes():
        lane(out / planned.label, planned.config)
    return build(plan, "calls"), out


def test_without_a_held_out_grade_the_figures_rest_on_the_feedback_and_are_numbers(
    built: tuple[Comparison, Path],
) -> None:
    comparison, _ = built
    assert comparison.basis == "feedback"
    [arm] = comparison.arms
    assert arm.pass_rate == 1.0 and arm.tasks == len(TASKS)  # every task passes its feedback once revised
    assert math.isfinite(arm.ci.low) and comparison.baselines[0].pass_rate[0] == pytest.approx(0.5)
    assert all(math.isfinite(d.mean) for d in comparison.against_baselines)
    assert any("no task had a held-out grade" in note for note in comparison.notes)
    assert not any("held at 0" in note for note in comparison.notes)  # the baseline has its samples


def test_the_terminal_says_which_pass_rate_it_shows(built: tuple[Comparison, Path]) -> None:
    buffer = io.StringIO()
    print_table(built[0], Console(file=buffer, width=120))
    printed = buffer.getvalue()
    assert "feedback pass rates (no held-out grade)" in printed and "nan" not in printed


def test_the_gate_reads_its_own_comparison_and_refuses_to_mix_bases(built: tuple[Comparison, Path]) -> None:
    comparison, out = built
    earlier = read_json(write_json(comparison, out))
    assert earlier.basis == "feedback" and regressions(comparison, earlier) == []
    graded = Comparison(**{**{f: getattr(comparison, f) for f in comparison.__struct_fields__}, "basis": "grade"})
    with pytest.raises(UserError, match="rest on the feedback, this one's on the grade"):
        regressions(graded, earlier)
    assert BASELINE in {p.name for p in out.iterdir()}
