"""The report names each figure's basis: its task tables show the held-out grade's verdict beside the feedback's
(before, a task that failed its feedback and passed the grade read "fail" and nothing else), and its money
apart from what the response cache saved; the end table of ``redraft run`` shows ``--batch`` and the cache's
savings, through `redraft.cli.main`."""

from __future__ import annotations

from pathlib import Path

import pytest

from redraft import RunConfig
from redraft.actors import driver
from redraft.actors.driver import RunOutcome
from redraft.protocols.messages import Result, Task, Usage, encode
from redraft.rundir import RunStore
from redraft.rundir.summary import summarize
from redraft.views.report import write_report
from tests.support.report_runs import html_tables
from tests.support.resolved import manifest_for
from tests.unit.test_cli import in_process
from tests.unit.test_cli_estimate import table_rows

SAVED = Usage(
    input_tokens=1_000, output_tokens=500, calls=3, cost_usd=0.00045, cache_hits=2, saved_calls=2, saved_usd=0.0003
)
"""Three calls priced as gpt-4o-mini's ($0.00045), two of them answered by the cache from another run ($0.0003)."""


def result(task_id: str, *, passed: bool, graded: bool | None, usage: Usage = SAVED) -> Result:
    return Result(
        task_id=task_id, scenario="arithmetic", answer="7", text="Answer: 7", score=float(passed), passed=passed,
        initial_score=0.0, initial_passed=False, rounds=1, stop_reason="max_rounds", usage=usage,
        usage_by_role={"drafter": usage}, wall_s=0.5, grade=None if graded is None else float(graded),
        graded_pass=graded,
    )  # fmt: skip


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    store = RunStore.open(root, manifest_for(RunConfig.build(scenario="arithmetic"), "run"))
    for made in (result("lucky", passed=False, graded=True), result("ungraded", passed=True, graded=None)):
        task = Task(task_id=made.task_id, scenario="arithmetic", prompt="What is 3 + 4?")
        store.append([encode(task), encode(made)], made)
    store.finish(1.0)
    return root


def test_the_task_tables_show_the_graded_verdict_beside_the_feedbacks(run_dir: Path) -> None:
    write_report(run_dir)
    tables = html_tables((run_dir / "report.html").read_text())
    header, *rows = tables["Tasks"]
    assert header[:4] == ["task", "feedback", "graded (held out)", "feedback score"]
    verdicts = {row[0]: row[1:3] for row in rows}
    assert verdicts == {"lucky": ["fail", "pass"], "ungraded": ["pass", "no grade"]}
    index = (run_dir / "report" / "index.html").read_text()
    assert "<th>graded (held out)</th>" in index and '<span class="pass">pass</span>' in index


def test_the_report_shows_what_was_spent_apart_from_what_the_cache_saved(run_dir: Path) -> None:
    write_report(run_dir)
    tables = html_tables((run_dir / "report.html").read_text())
    summary = dict((row[0], row[1]) for row in tables["Summary"])
    assert summary["spent"] == "$0.0003 paid by this run"  # 2 × ($0.00045 − $0.0003)
    assert summary["saved by the cache"] == "$0.0006 (4 calls paid by others)"
    assert summary["cost of the calls"] == "$0.0009, every call at list price"
    header, drafter = tables["Tokens and cost per role"]
    assert header[-3:] == [
        "spent (paid by this run)",
        "saved by the cache (paid by another run)",
        "saved by the provider's cache (already out of spent)",
    ]
    assert drafter[-3:] == ["$0.0003", "$0.0006", "$0.0000"]


def test_the_end_table_of_run_shows_the_batch_mode_and_the_caches_savings(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    batched = Usage(input_tokens=800, output_tokens=200, calls=4, cost_usd=0.00012, batch_calls=4)
    summary = summarize(
        [result("a", passed=True, graded=True), result("b", passed=True, graded=True, usage=batched)], wall_s=2.0
    )
    monkeypatch.setattr(driver, "run", lambda *args, **kwargs: RunOutcome(run_dir, summary, total=2, skipped=0))
    assert in_process("run", "arithmetic", "--limit", "2", "--out", str(run_dir)) == 0
    rows = {row[0]: row[1] for row in table_rows(capsys.readouterr().out)}
    assert rows["model calls"] == "7 (2 from the cache)"
    assert rows["through provider batches (--batch)"] == "4 of 7 calls, at batch price"
    assert rows["spent"] == "$0.0003 paid by this run"  # $0.00015 + $0.00012
    assert rows["saved by the cache"] == "$0.0003 (2 calls paid by others)"
    assert rows["cost of the calls"] == "$0.0006, every call at list price"
