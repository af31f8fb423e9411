"""The compare table gives every lane's own pass rate, the baselines' included, each with its interval: before,
the table listed the arms alone, and a reader saw the baselines only as differences ("+12.0% vs best-of-n")."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from redraft.cli._compare import print_table
from redraft.comparison._analysis import Comparison
from redraft.comparison._html import write_html
from redraft.stats import wilson
from tests.support.report_runs import html_tables
from tests.unit.comparison.test_compare_feedback_basis import TASKS, built

__all__ = ["built"]  # the module's fixture: a comparison's lanes written, then built


def test_each_baseline_curve_has_its_interval_over_the_tasks(built: tuple[Comparison, Path]) -> None:
    comparison, _ = built
    for curve in comparison.baselines:
        assert curve.tasks == len(TASKS) and len(curve.ci) == len(curve.pass_rate) == curve.samples == 3
        low, high = wilson(curve.pass_rate[-1] * curve.tasks, curve.tasks)
        assert (curve.ci[-1].low, curve.ci[-1].high) == pytest.approx((low, high))
        assert curve.total_usd == pytest.approx(0.0)  # the scripted model is free


def test_the_terminal_table_has_a_row_for_each_baseline_with_its_interval(built: tuple[Comparison, Path]) -> None:
    comparison, _ = built
    console = Console(width=120, record=True, file=io.StringIO())
    print_table(comparison, console)
    lines = console.export_text().splitlines()
    for curve in comparison.baselines:
        at = next(i for i, line in enumerate(lines) if line.split()[:1] == [curve.name])
        rate, ci = curve.pass_rate[-1], curve.ci[-1]
        assert f"{rate:.1%}" in lines[at]
        assert "(baseline, n=3)" in lines[at + 1] and f"[{ci.low * 100:.1f}, {ci.high * 100:.1f}]" in lines[at + 1]
        assert f"{3 * curve.mean_calls_per_sample:.1f}" in lines[at]  # its calls per task at n = N


def test_the_page_lists_the_baselines_beside_the_arms_with_a_link_to_their_lane(
    built: tuple[Comparison, Path],
) -> None:
    comparison, out = built
    page = write_html(comparison, out, {"adversarial": "arms/adversarial/report.html", "baseline": "b/report.html"})
    rows = html_tables(page.read_text())["Arms and baselines"][1:]
    assert [row[0] for row in rows] == [
        "adversarial",
        "best_of_n\n(baseline, n=3)",
        "self_consistency\n(baseline, n=3)",
    ]
    best = comparison.baselines[0]
    assert rows[1][1] == f"{best.pass_rate[-1]:.1%}\n[{best.ci[-1].low * 100:.1f}, {best.ci[-1].high * 100:.1f}]"
    assert rows[1][-1] == rows[2][-1] == "baseline"  # the link to the baselines' lane report
