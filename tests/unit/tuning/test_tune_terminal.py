"""``redraft tune`` in the terminal, through `redraft.cli.main`, in this process: the evaluations are scored by
a known rule instead of runs on Ray, and the proposer is a function. Before: the inner evaluations printed their
own "resuming"/"interrupted: 0 of 8 tasks done" lines and added their counters up across evaluations, the
terminal counted iterations 1-6 and the page 0-5, the verdict was printed twice, ``--dry-run`` wrote the splits,
the manifest and the start, a resume's estimate counted what was done, and a one-point plot had axes of ±0.04.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from redraft.errors import Interrupted
from redraft.protocols.tuning import Proposal, ProposeRequest
from redraft.tuning import _api
from redraft.tuning._journal import Evaluation
from redraft.tuning._report import TuneReport, validation_figure
from redraft.tuning._verdict import TUNED
from tests.support import tune_world
from tests.support.report_runs import html_tables
from tests.unit.test_cli import in_process
from tests.unit.tuning.test_search import Evaluator, Proposer, examples

MODEL = "scripted:tests.support.tune_world:rule_follower"


class Scorer(Evaluator):
    """`Evaluator`'s rule (a task passes when the drafter's system prompt holds the rule), each evaluation
    costing a call a task; interrupted, as a signal would, at its ``stop_at``-th evaluation."""

    def __init__(self, stop_at: int | None = None) -> None:
        super().__init__("rule")
        self.stop_at = stop_at

    def __call__(self, candidate: str, on: str, prompts: Path, tasks: Path, out: Path) -> Evaluation:
        if self.calls + 1 == self.stop_at:
            raise Interrupted("interrupted: 0 of 8 tasks done", done=0, total=8)
        return super().__call__(candidate, on, prompts, tasks, out)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """No Ray: evaluations by a `Scorer`, proposals by a function that reads the examples it is given."""
    made: dict[str, Any] = {"scorer": Scorer(), "proposer": Proposer()}
    monkeypatch.setattr(_api, "ensure_ray", lambda *args, **kwargs: None)
    monkeypatch.setattr(_api, "RunEvaluator", lambda *args, **kwargs: made["scorer"])
    monkeypatch.setattr(_api, "_proposer", lambda *args: (made["proposer"], lambda: None))
    monkeypatch.setattr(_api, "Search", functools.partial(_api.Search, read_examples=examples))
    made["tasks"] = tune_world.write_tasks(tmp_path / "tasks.jsonl", 30)
    return made


def tune_args(world: dict[str, Any], out: Path, *extra: str, proposals: int = 3) -> list[str]:
    return [
        "tune", "--tasks", str(world["tasks"]), "--check", "tests.support.tune_world:check",
        "--grade", "tests.support.tune_world:grade", "--model", MODEL, "--strategy", "best_of_n", "--samples", "1",
        "--max-rounds", "1", "--sections", "draft_system", "--minibatch", "4", "--max-proposals", str(proposals),
        "--parallel", "1", "--out", str(out), *extra,
    ]  # fmt: skip


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_terminal_speaks_of_the_tune_and_says_the_verdict_once(
    world: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t"
    assert in_process(*tune_args(world, out)) == 0
    printed = capsys.readouterr()
    said = printed.out + printed.err
    tuning = [line for line in printed.err.splitlines() if line.startswith("tuning: ")]
    assert tuning[0] == "tuning: the starting prompts on validation · 0 evaluations · 0 proposals · $0.0000 spent"
    assert tuning[1] == "tuning: iteration 1 of 3 (0 done) · 1 evaluation · 0 proposals · $0.0000 spent"
    assert tuning[-1].startswith("tuning: the verdict on the test split (3 of 3 iterations done) · ")
    assert "resuming" not in said and "refining" not in said and "tasks done" not in said
    report = json.loads((out / "tune.json").read_text())
    verdict = report["verdict"]["says"]
    assert verdict.startswith("significant improvement") and said.count(verdict) == 1
    assert printed.out.splitlines()[0] == verdict and (out / TUNED).exists()
    # Iterations are counted from 1 in the terminal, tune.json and tune.html alike.
    assert "redraft: iteration 1 of 3: c0, draft_system -> c1: minibatch 0.000 -> 1.000, kept" in printed.err
    assert [i["number"] for i in report["iterations"]] == [1, 2, 3]
    assert {c["id"]: c["iteration"] for c in report["candidates"]}["c1"] == 1
    rows = html_tables((out / "tune.html").read_text())["Iterations"]
    assert [row[0] for row in rows[1:]] == ["1", "2", "3"]


def test_an_interruption_is_said_in_the_tunes_terms(
    world: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world["scorer"] = Scorer(stop_at=4)  # the start, iteration 1's two minibatch runs and its validation, then stop
    assert in_process(*tune_args(world, tmp_path / "t")) == 130
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        "redraft: interrupted: 0 of 3 iterations done, 3 evaluations recorded; rerun with the same --out to resume"
    )
    assert "tasks done" not in err


def test_a_dry_run_writes_nothing_and_a_resumes_estimate_counts_what_is_left(
    world: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh = tmp_path / "fresh"
    assert in_process(*tune_args(world, fresh, "--dry-run")) == 0
    assert not fresh.exists()
    first = capsys.readouterr().err
    assert "dry run: no model was called and nothing was written" in first
    out = tmp_path / "t"
    world["scorer"] = Scorer(stop_at=8)  # iterations 1 (kept) and 2 (not kept) recorded, then stopped in 3
    assert in_process(*tune_args(world, out)) == 130
    before = snapshot(out)
    capsys.readouterr()
    assert in_process(*tune_args(world, out, "--dry-run")) == 0
    assert snapshot(out) == before
    [line] = [line for line in capsys.readouterr().err.splitlines() if "estimate:" in line]
    # A call a task (one draft, one round): what is left is iteration 3, (2 x 4 + 9) tasks and a proposal, and
    # the verdict, 2 x 9 test tasks; the whole tune adds the start on 9 validation tasks and iterations 1 and 2.
    assert line.endswith("resuming: 2 of 3 iterations done; of what is left; estimate: about 0 s expected, 0 s at "
                         "most; 36 calls expected, 36 at most (the models cost no USD)")  # fmt: skip
    assert "estimate: about 0 s expected, 0 s at most; 81 calls expected, 81 at most" in first


def test_a_tune_with_one_scored_candidate_says_so_instead_of_plotting_a_dot(
    world: dict[str, Any], tmp_path: Path
) -> None:
    world["proposer"] = _refusing
    out = tmp_path / "t"
    assert in_process(*tune_args(world, out, proposals=2)) == 0
    page = (out / "tune.html").read_text()
    assert "Only c0 has a validation figure (0.000): no kept candidate to compare it with" in page
    assert "data:image/png" not in page


def _refusing(request: ProposeRequest) -> Proposal:
    return Proposal(section=request.section, text=None, reason="", refused="unchanged", detail="same text")


def test_the_validation_plot_has_whole_iterations_and_the_figures_whole_range(
    world: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "t"
    assert in_process(*tune_args(world, out)) == 0
    report = msgspec.json.decode((out / "tune.json").read_bytes(), type=TuneReport)
    fig = validation_figure(report)
    assert fig is not None
    [ax] = fig.axes
    assert ax.get_ylim() == (0.0, 1.0) and ax.get_xlim() == (-0.5, 3.5)
    assert all(float(t).is_integer() for t in ax.get_xticks())
    xs = sorted(float(x) for line in ax.get_lines() for x in line.get_xdata())
    assert xs == [0.0, 1.0]  # the start and c1, kept in iteration 1: on the page's count
