"""A plan's versions in `redraft trace` and the report: each version with why it changed, after which step,
and its diff from the one before; the round's candidate is the verified steps' program, not a step's."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from redraft import RunConfig
from redraft.cli import main
from redraft.engine._refine import refine_trace
from redraft.engine.grader import Grader
from redraft.engine.resolution import arbiter_settings
from redraft.protocols.messages import Result, decode_as, encode
from redraft.rundir import RunReader, RunStore, build_history
from redraft.scenarios import get_scenario
from redraft.strategies._plan_state import PROGRAM_HEADER
from redraft.views.report import write_report
from tests.support.harness import scripted_arbiter
from tests.support.plan_scripts import Discovering
from tests.support.resolved import manifest_for

TASK = list(get_scenario("pipeline").tasks(seed=0))[4]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plans") / "run"
    config = RunConfig.build(scenario="pipeline", strategy="plan_execute", max_rounds=1, out=str(root))
    arbiter = scripted_arbiter(Discovering(), arbiter_settings(config), scenario="pipeline")
    store = RunStore.open(root, manifest_for(config, root.name))
    trace = asyncio.run(refine_trace(arbiter, Grader("pipeline"), TASK))
    store.append([encode(m) for m in trace], decode_as(encode(trace[-1]), Result))
    store.finish(wall_s=1.0)
    return root


def test_trace_shows_each_plan_version_with_its_reason_trigger_and_diff(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["trace", str(run_dir), TASK.task_id])
    printed = capsys.readouterr().out
    assert "plan v1 (round 0)" in printed and "plan v2 (round 0 after step 2)" in printed
    assert "why: order_date holds dates in more than one format" in printed
    assert "added [3] · changed [4] · kept verified [1, 2]" in printed
    assert re.search(r"^\+3\. normalise order_date", printed, re.MULTILINE)
    assert re.search(r"^-3\. write the final table; reads gathered\.csv", printed, re.MULTILINE)
    # Each ask in a few words, not the plan it carries (the plan is shown by version).
    assert "plan=write the plan" in printed and "plan=write step 3's program" in printed
    assert "plan=decide what to do: step 2 ran" in printed
    assert "step: run step 3 over the task's files and gathered.csv, inventory.csv" in printed
    assert '"observations"' not in printed and '"contract"' not in printed
    # Each step's run as the next move saw it: the dates of step 2's output in two formats and more.
    assert re.search(r"order_date \(\w+, \d+ distinct\): YYYY-MM-DD x\d+, DD\.MM\.YYYY x\d+", printed)


def test_the_best_candidate_is_the_whole_program_and_each_step_keeps_its_own_checks(run_dir: Path) -> None:
    reader = RunReader(run_dir)
    entry = reader.find(TASK.task_id)
    history = build_history(TASK.task_id, reader.frames(entry))
    [rnd] = history.rounds
    assert rnd.decision is not None
    best = history.best_of(rnd.decision.message)
    assert best is not None and best.stage is None and best.draft.message.text.startswith(PROGRAM_HEADER)
    assert best.grade is not None and best.grade.passed
    steps = {c.stage: c for c in rnd.candidates if c.stage and c.stage.startswith("step-")}
    assert set(steps) == {"step-1", "step-2", "step-3", "step-4"}
    assert all(c.verification is not None and c.passed for c in steps.values())
    assert [c.message.version for c in history.plans] == [1, 2]


def test_the_task_page_has_the_plan_history(run_dir: Path) -> None:
    write_report(run_dir)
    [page] = [p for p in (run_dir / "report").glob("*.html") if TASK.task_id in p.name]
    html = page.read_text()
    assert 'id="plan-v1"' in html and 'id="plan-v2"' in html
    assert "after step 2" in html and "kept verified 1, 2" in html
    assert "step 2 (exit 0) -&gt; gathered.csv: 32 rows" in html
    assert html.index("Plan history") < html.index('id="round-0"')
