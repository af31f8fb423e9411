"""An arm fed the held-out grade (``oracle_feedback = true``) is marked wherever it is shown and kept off the
Pareto front: in comparison.json, the HTML tables, the terminal rows, the notes and the plots."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from redraft import RunConfig
from redraft.cli._compare import print_table
from redraft.comparison._analysis import Comparison
from redraft.comparison._arms import Arm
from redraft.comparison._html import charts, pareto, write_html
from redraft.comparison._result import _oracle_notes, build, write_json
from redraft.comparison._runner import BASELINE, ComparePlan
from tests.integration.test_compare_browser import arm, curve
from tests.support.report_runs import html_tables, make_run


def with_oracle() -> Comparison:
    """An oracle arm cheaper and better than the real one, both above the baselines' curves."""
    arms = [arm("fed", 0.95, 2.0, oracle=True), arm("plain", 0.8, 3.0)]
    low = curve("best_of_n")
    low.pass_rate = [r / 2 for r in low.pass_rate]
    return Comparison(
        scenario="arithmetic",
        match="calls",
        tasks=80,
        arms=arms,
        baselines=[low],
        against_baselines=[],
        between_arms=[],
    )


def test_an_oracle_arm_is_not_on_the_pareto_front_and_does_not_push_a_real_arm_off_it() -> None:
    assert pareto(with_oracle()) == ["plain"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Comparison, Path]:
    """A comparison built from run directories: arm ``fed`` with oracle_feedback = true, arm ``plain`` without."""
    out = tmp_path_factory.mktemp("oracle")
    arms = [
        Arm(name="plain", settings={"strategy": "adversarial"}),
        Arm(name="fed", settings={"strategy": "adversarial", "oracle_feedback": True}),
    ]
    plan = ComparePlan(base=RunConfig.build(scenario="arithmetic"), arms=arms, out=out, baseline_samples=2)
    for label in ("arms/plain", "arms/fed", BASELINE):
        make_run(out / label, max_rounds=2)  # the runs' own settings are not what is tested here
    return build(plan, "calls"), out


def test_comparison_json_marks_each_arm_oracle_or_not(built: tuple[Comparison, Path]) -> None:
    comparison, out = built
    saved = json.loads(write_json(comparison, out).read_text())
    assert {a["name"]: a["oracle"] for a in saved["arms"]} == {"plain": False, "fed": True}
    assert any(note.startswith("oracle (fed the held-out grade") and note.endswith(": fed") for note in saved["notes"])


def test_the_html_tables_say_oracle_and_leave_it_off_the_front(built: tuple[Comparison, Path]) -> None:
    comparison, out = built
    page = write_html(comparison, out, {}).read_text()
    tables = html_tables(page)
    names = {row[0] for row in tables["Arms and baselines"][1:] if "(baseline" not in row[0]}
    assert names == {"plain", "fed\n(oracle)"}
    assert {row[0] for row in tables["Against the sampling baselines, at the arm's own cost"][1:]} == {
        "plain",
        "fed (oracle)",
    }
    assert {tuple(row[:2]) for row in tables["Arm against arm"][1:]} == {("plain", "fed (oracle)")}
    front = page.split("On the Pareto front")[1].split("</p>")[0]
    assert front.endswith("<b>plain</b>")  # the list of arms on the front: the real arm alone


def test_the_terminal_rows_say_oracle() -> None:
    console = Console(width=80, record=True, file=io.StringIO())
    print_table(with_oracle(), console)
    cells = [line.split()[0] for line in console.export_text().splitlines() if line.strip()]
    assert cells[cells.index("fed") + 1] == "(oracle)"  # the arm's cell: its name, then the mark below it
    assert cells[cells.index("plain") + 1] != "(oracle)"


def test_the_plots_mark_the_oracle_arm() -> None:
    c = with_oracle()
    plane, by_round, flips = (fig for fig, _ in charts(c, pareto(c)))
    [ax] = plane.axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "fed (oracle: fed the grade)" in labels and "plain (Pareto front)" in labels
    [oracle_marker] = [ln for ln in ax.get_lines() if ln.get_marker() == "D"]
    assert oracle_marker.get_markerfacecolor() == "none"
    [ax] = by_round.axes
    assert "fed (oracle: fed the grade)" in [t.get_text() for t in ax.get_legend().get_texts()]
    [ax] = flips.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["fed (oracle: fed the grade)", "plain"]


def test_a_comparison_run_with_oracle_feedback_says_the_baseline_was_fed_the_grade_too() -> None:
    arms = [arm("a", 0.5, 2.0, oracle=True)]
    assert any("sampling baseline was fed the held-out grade" in note for note in _oracle_notes(arms, True))
    assert not any("sampling baseline" in note for note in _oracle_notes(arms, False))
    assert _oracle_notes([arm("b", 0.5, 2.0)], False) == []
