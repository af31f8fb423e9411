"""The terminal table of `redraft compare`: the baseline's n actually used, and 80 columns without truncation."""

from __future__ import annotations

import io

from rich.console import Console

from redraft.cli._compare import print_table
from redraft.comparison._analysis import Comparison
from tests.integration.test_compare_browser import arm, curve, difference


def comparison(budget: float) -> Comparison:
    arms = [arm("self_refine_long_name", 0.7, budget)]
    return Comparison(
        scenario="arithmetic",
        match="calls",
        tasks=80,
        arms=arms,
        baselines=[curve("best_of_n"), curve("self_consistency")],
        against_baselines=[difference(arms[0].name, c, 0.12, budget) for c in ("best_of_n", "self_consistency")],
        between_arms=[],
    )


def printed(c: Comparison, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    print_table(c, console)
    return console.export_text()


def test_a_budget_above_the_baseline_s_n_shows_the_n_used() -> None:
    held = printed(comparison(10.0), 120)
    assert "@n=8 (held)" in held and "@n=10.0" not in held  # the curves have N = 8
    assert "@n=3.4" in printed(comparison(3.4), 120)


def test_at_80_columns_nothing_is_cut() -> None:
    text = printed(comparison(10.0), 80)
    assert "…" not in text and "self_refine_long_name" in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    assert "tokens" not in text  # left to comparison.html when narrow
    assert "tokens" in printed(comparison(10.0), 120)
