"""comparison.html's plots, read from the matplotlib figures: graded rates, labelled, on 0–100 % axes."""

from __future__ import annotations

from redraft.comparison._analysis import Comparison, Interval
from redraft.comparison._html import charts, pareto
from tests.integration.test_compare_browser import arm, curve


def comparison() -> Comparison:
    perfect = arm("adversarial", 1.0, 3.1)
    perfect.ci = Interval(0.68, 1.0)
    perfect.pass_rate_by_round = [0.5, 1.0, 1.0]
    return Comparison(
        scenario="arithmetic",
        match="calls",
        tasks=8,
        arms=[perfect, arm("self_refine", 0.7, 3.4)],
        baselines=[curve("best_of_n"), curve("self_consistency")],
        against_baselines=[],
        between_arms=[],
    )


def test_every_rate_axis_runs_from_0_to_100_and_says_the_rate_is_graded() -> None:
    c = comparison()
    drawn = charts(c, pareto(c))
    assert len(drawn) == 3
    for fig, caption in drawn:
        [ax] = fig.axes
        assert ax.get_ylim() == (0.0, 100.0), caption
        assert "grade" in ax.get_ylabel(), caption
        assert all(y <= 100.0 for ln in ax.get_lines() for y in ln.get_ydata()), caption
