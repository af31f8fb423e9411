"""`redraft run --dry-run` prints the estimate and starts nothing; a run on a paid model says its estimate in one
line before it starts, with a warning for each run budget its worst case is over; an unpriced model is said to be
unpriced, never priced at $0; the embedded model's run says nothing more than it did."""

from __future__ import annotations

from pathlib import Path

import pytest

import redraft
from redraft import RunConfig
from redraft.actors import driver
from redraft.engine.estimate import duration
from redraft.errors import UserError
from tests.unit.test_cli import in_process

PAID = ["run", "arithmetic", "--model", "openai:gpt-4o-mini", "--limit", "6", "--samples", "2"]
UNPRICED = "openai-compatible:my-model@http://127.0.0.1:9/v1"


def table_rows(printed: str) -> list[list[str]]:
    """The cells of each row of a table the terminal shows."""
    return [[cell.strip() for cell in line.strip("│").split("│")] for line in printed.splitlines() if line[:1] == "│"]


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Ray is never started: joining it fails the command (with a usage error) and is recorded."""
    started: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        started.append(args)
        raise UserError("no Ray in this test")

    monkeypatch.setattr(driver, "ensure_ray", refuse)
    return started


def test_a_dry_run_prints_the_estimate_and_starts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_ray: list[object]
) -> None:
    assert in_process(*PAID, "--dry-run", "--out", str(tmp_path / "run")) == 0
    shown = capsys.readouterr()
    assert no_ray == [] and not (tmp_path / "run").exists()  # no Ray, no run directory
    assert shown.out.splitlines()[0] == "estimate: arithmetic, 6 tasks, adversarial, 2 drafts a round, up to 3 rounds"
    rows = table_rows(shown.out)
    assert [row[0] for row in rows] == [
        "all pass at once",
        "expected",
        "drafter gpt-4o-mini",
        "critic gpt-4o-mini",
        "worst case",
        "drafter gpt-4o-mini",
        "critic gpt-4o-mini",
    ]
    made = redraft.estimate(RunConfig.build(scenario="arithmetic", model="openai:gpt-4o-mini", limit=6, samples=2))
    worst = made.worst.total
    figures = [f"{worst.calls:,}", f"{worst.input_tokens:,}", f"{worst.output_tokens:,}", made.usd(worst)]
    assert rows[4][1:] == [duration(made.wall(made.worst)), *figures]  # the wall time first
    # A provider's calls: a second each and 50 tokens/s, over the 64 tasks a run has in flight by default.
    assert made.wall(made.worst) == pytest.approx((worst.calls * 1.0 + worst.output_tokens / 50.0) / 64)
    assert worst.calls == 6 * (3 * 2 + 2 * 2) and made.usd(worst).startswith("$")
    assert "- worst case: every answer at its max tokens (--max-tokens 128 a draft)" in shown.out
    assert "dry run: no model was called and nothing was written" in shown.err


@pytest.mark.parametrize("flag", ["--budget-usd", "--budget-calls"])
def test_the_budget_warning_appears_exactly_when_the_worst_case_is_over_the_budget(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    made = redraft.estimate(RunConfig.build(scenario="arithmetic", model="openai:gpt-4o-mini", limit=6, samples=2))
    worst = made.worst.total.cost_usd if flag == "--budget-usd" else made.worst.total.calls
    below, at = (worst * 0.999, worst * 1.001) if flag == "--budget-usd" else (worst - 1, worst)
    for budget, warned in ((below, True), (at, False)):
        assert in_process(*PAID, "--dry-run", flag, repr(budget)) == 0
        err = capsys.readouterr().err
        assert (f"is over {flag}" in err) == warned, (budget, err)
    assert in_process(*PAID, "--dry-run", flag, repr(below)) == 0
    assert "the budget stops the run after about 5 of its 6 tasks" in capsys.readouterr().err


def test_an_unpriced_model_is_said_to_be_unpriced_not_free(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "arithmetic", "--model", UNPRICED, "--limit", "3", "--dry-run", "--budget-usd", "0.01"]
    assert in_process(*args) == 0
    shown = capsys.readouterr()
    rows = table_rows(shown.out)
    assert rows and {row[-1] for row in rows} == {"unpriced"}
    assert "$" not in shown.out and "$" not in shown.err
    assert "- unpriced: my-model, not in the price table: counted, not priced" in " ".join(shown.out.split())


def test_local_models_show_calls_and_tokens_and_no_usd(capsys: pytest.CaptureFixture[str]) -> None:
    assert in_process("run", "arithmetic", "--limit", "3", "--dry-run") == 0
    shown = capsys.readouterr().out
    assert "USD" not in shown.splitlines()[2] and "$" not in shown
    assert "- USD: the models are local or scripted, and cost nothing" in shown


def test_a_paid_run_says_its_estimate_in_one_line_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_ray: list[object]
) -> None:
    assert in_process(*PAID, "--out", str(tmp_path / "paid"), "--budget-usd", "0.0001") == 2
    said = capsys.readouterr().err.splitlines()
    assert len(no_ray) == 1  # it got as far as starting Ray, after the estimate
    assert said[0].startswith("redraft: estimate: 6 tasks, about ") and said[0].endswith("(--dry-run shows how)")
    assert " at most; expected $" in said[0]  # the time first, then the money
    assert said[1].startswith("redraft: warning: the worst case, $") and "is over --budget-usd 0.0001" in said[1]


def test_the_embedded_models_run_says_no_more_than_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_ray: list[object]
) -> None:
    assert in_process("run", "arithmetic", "--limit", "3", "--out", str(tmp_path / "local")) == 2
    assert len(no_ray) == 1
    assert "estimate" not in capsys.readouterr().err


def test_a_dry_run_on_the_embedded_model_says_its_time_from_the_model_s_recorded_speed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before, a dry run gave calls and no time: the demo's 10 tasks said nothing of the minutes they take."""
    assert in_process("run", "arithmetic", "--limit", "10", "--dry-run") == 0
    shown = capsys.readouterr().out
    made = redraft.estimate(RunConfig.build(scenario="arithmetic", limit=10))
    expected, worst = made.expected.total, made.worst.total
    # One model host serves every role's calls: the run's tokens at its rates, prompts read and tokens made.
    assert made.wall(made.expected) == pytest.approx(expected.input_tokens / 935 + expected.output_tokens / 116)
    assert 0 < made.wall(made.expected) < made.wall(made.worst)
    rows = {row[0]: row[1] for row in table_rows(shown) if row[0] in ("expected", "worst case")}
    assert rows == {"expected": duration(made.wall(made.expected)), "worst case": duration(made.wall(made.worst))}
    said = " ".join(shown.split())
    assert "- time: the embedded model at 116 tokens/s made and 935 read" in said and "2026-11-24" in said
    assert made.summary().startswith(f"estimate: 10 tasks, about {duration(made.wall(made.expected))} expected, ")
    assert worst.calls > 0


def test_compare_dry_run_estimates_every_arm_and_the_baseline_in_one_table_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, `compare` had no --dry-run: a comparison's time and money were known only by running it."""
    from redraft.comparison import _runner

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dry run started Ray")

    monkeypatch.setattr(_runner, "ensure_ray", refuse)
    out = tmp_path / "cmp"
    args = ["compare", "arithmetic", "--arms", "adversarial,none", "--limit", "4", "--model", "openai:gpt-4o-mini"]
    assert in_process(*args, "--out", str(out), "--dry-run", "--budget-calls", "30") == 0
    shown = capsys.readouterr()
    assert not out.exists()
    assert shown.out.splitlines()[0] == "estimate: compare arithmetic, 3 lanes (the arms, the baseline)"
    rows = {row[0]: row[1:] for row in table_rows(shown.out)}
    assert list(rows) == ["arms/adversarial", "arms/none", "baseline", "all lanes"]
    per_lane = _runner.DEFAULT_IN_FLIGHT // 3  # the lanes share the comparison's tasks in flight
    base = RunConfig.build(scenario="arithmetic", model="openai:gpt-4o-mini", limit=4, max_tasks_in_flight=per_lane)
    arm = redraft.estimate(base.replace(strategy="adversarial"))
    baseline = redraft.estimate(base.replace(strategy="self_consistency", samples=16, max_rounds=1))
    assert rows["arms/adversarial"][:5] == [
        "4", duration(arm.wall(arm.expected)), duration(arm.wall(arm.worst)),
        f"{arm.expected.total.calls:,}", f"{arm.worst.total.calls:,}",
    ]  # fmt: skip
    assert rows["baseline"][3:5] == [f"{baseline.expected.total.calls:,}", f"{baseline.worst.total.calls:,}"]
    assert rows["arms/adversarial"][5].startswith("$") and rows["all lanes"][6].startswith("$")
    calls = sum(int(row[3].replace(",", "")) for name, row in rows.items() if name != "all lanes")
    assert rows["all lanes"][3] == f"{calls:,}"
    said = " ".join(shown.out.split())
    assert "baseline: worst case: every answer at its max tokens" in said and "- time: a provider's call at 1 s" in said
    assert "redraft: warning: baseline: the worst case, 64 calls, is over --budget-calls 30" in shown.err
    assert "dry run: no model was called and nothing was written" in shown.err
