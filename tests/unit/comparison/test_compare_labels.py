"""Every figure of a comparison names its basis, where it is shown: "graded" only when a held-out grade exists,
else "feedback"; shares of revisions are told apart from counts of tasks; no arm hides another on the cost
plane. Before: a comparison with no grade still said "graded pass [95% CI]" in the terminal, "graded pass rate
at n = …" on the page and "by the held-out grade" on a plot, and its "broke 12 %" (a share of revisions) sat
beside end tables that said fixed / broken 0 / 0 (tasks)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from redraft.cli._compare import print_table
from redraft.comparison._analysis import Comparison, Interval
from redraft.comparison._charts import ArmPoint, cost_plane
from redraft.comparison._html import charts, pareto, write_html
from tests.integration.test_compare_browser import arm, curve
from tests.unit.comparison.test_compare_feedback_basis import TASKS, built

__all__ = ["built"]  # the module's fixture: the comparison of a user's check with no grade, its lanes written


def test_the_terminal_names_the_feedback_pass_rate_and_never_says_graded(built: tuple[Comparison, Path]) -> None:
    buffer = io.StringIO()
    print_table(built[0], Console(file=buffer, width=120))
    printed = buffer.getvalue()
    assert "graded" not in printed
    lines = printed.splitlines()
    below = next(i for i, line in enumerate(lines) if "[95% CI]" in line)
    assert lines[below - 1].split()[:2] == ["feedback", "pass"]  # the column's head, above its interval


def test_the_page_and_its_plots_name_the_feedback_and_never_the_grade(built: tuple[Comparison, Path]) -> None:
    comparison, out = built
    page = write_html(comparison, out, {}).read_text()
    assert "graded pass" not in page and "by the grade" not in page
    assert "<th>feedback pass rate at n = 1 … N</th>" in page
    assert "<th>feedback pass\n[95% CI]</th>" in page
    _, _, flips = charts(comparison, pareto(comparison))
    [ax] = flips[0].axes
    title = "What revisions did (share of revisions, not of tasks), by the feedback (no held-out grade)"
    assert ax.get_title() == title
    assert ax.get_ylabel() == "% of a round's revisions, by the feedback (no held-out grade)"
    assert "held-out grade" not in flips[1].replace("no held-out grade", "")


def test_tasks_fixed_and_broken_are_counted_apart_from_the_share_of_revisions(built: tuple[Comparison, Path]) -> None:
    comparison, out = built
    [adversarial] = comparison.arms
    odd = len([t for t in TASKS if int(t.task_id[1:]) % 2])
    assert (adversarial.fixed_tasks, adversarial.broken_tasks) == (odd, 0)  # the end tables' fixed / broken
    assert adversarial.fixed_by_round == {"1": 1.0}  # every revision of round 1 fixed its task's best
    page = write_html(comparison, out, {}).read_text()
    assert "tasks fixed / broken (round 0 → final)" in page and f'<td class="num">{odd} / 0</td>' in page
    assert "share of the round's" in page


def test_arms_on_one_point_are_set_apart_with_markers_of_their_own_and_the_legend_beside_the_data() -> None:
    same = [ArmPoint(name, 3.0, 0.6, 0.5, 0.7, False, False) for name in ("adversarial", "self_refine", "cove")]
    fig = cost_plane(same, [("best_of_n", [1.0, 2.0, 3.0, 4.0], [0.3, 0.5, 0.6, 0.65])], "model calls per task")
    [ax] = fig.axes
    drawn = [c.lines[0] for c in ax.containers if c.get_label() in {"adversarial", "self_refine", "cove"}]
    xs = sorted(float(ln.get_xdata()[0]) for ln in drawn)
    assert len(xs) == 3 and xs[0] < xs[1] < xs[2] and xs[1] == 3.0  # centred on the point
    assert xs == pytest.approx([3.0 - 0.075, 3.0, 3.0 + 0.075])  # 2.5 % of the cost axis's span (1 to 4) apart
    assert len({ln.get_marker() for ln in drawn}) == 3
    fig.canvas.draw()
    legend, axes = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= axes.x1  # beside the axes, over no point


def test_a_graded_comparison_still_says_graded() -> None:
    c = Comparison(
        scenario="arithmetic",
        match="calls",
        tasks=80,
        arms=[arm("adversarial", 0.8, 3.0)],
        baselines=[curve("best_of_n"), curve("self_consistency")],
        against_baselines=[],
        between_arms=[],
    )
    c.arms[0].ci = Interval(0.7, 0.9)
    buffer = io.StringIO()
    print_table(c, Console(file=buffer, width=120))
    assert "graded pass" in buffer.getvalue()
    _, _, flips = charts(c, pareto(c))
    assert flips[0].axes[0].get_title().endswith("by the held-out grade")
