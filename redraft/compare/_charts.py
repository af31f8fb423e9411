"""The comparison's plots, on matplotlib's Agg canvas, returned as `Figure` s (`redraft.views.plots.png` makes
the PNG), under the report's rules: every pass rate here is the held-out graded one and says so, on a 0–100 %
axis (`percent_axis`)."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from redraft.views.plots import BLUE, GREY, ORANGE, figure, percent_axis

COLOURS = ["#2f6db5", "#e07b28", "#18794e", "#b42318", "#6b4fbb", "#8c6d1f", "#0f7c8c", "#c2185b"]

ArmPoint = tuple[str, float, float, float, float, bool]
"""(name, cost, graded pass rate, interval low, interval high, on the Pareto front)."""
CurveLine = tuple[str, Sequence[float], Sequence[float]]
"""(name, cost at n = 1..N, pass rate at n = 1..N)."""


def cost_plane(arms: Sequence[ArmPoint], curves: Sequence[CurveLine], cost_label: str) -> Figure:
    """Each arm's graded pass rate (with its 95 % interval) at its cost, over the sampling baselines' curves."""
    fig, ax = figure(width=6.4, height=4.0)
    for (name, costs, rates), style in zip(curves, ("-", "--"), strict=False):
        ax.plot(costs, [r * 100 for r in rates], style, color=GREY, linewidth=2, label=f"baseline: {name}")
    for i, (name, cost, rate, low, high, front) in enumerate(arms):
        colour = COLOURS[i % len(COLOURS)]
        ax.errorbar(
            [cost],
            [rate * 100],
            yerr=[[max(rate - low, 0) * 100], [max(high - rate, 0) * 100]],
            fmt="*" if front else "o",
            markersize=12 if front else 7,
            color=colour,
            capsize=4,
            label=f"{name}{' (Pareto front)' if front else ''}",
            clip_on=False,
        )
    ax.set_xlabel(cost_label)
    percent_axis(ax, "graded pass rate (held out), % of tasks")
    ax.set_title("Graded pass rate against cost: arms (95% CI) over sampling", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    return fig


def rounds_lines(by_arm: dict[str, Sequence[float]]) -> Figure:
    """Each arm's graded pass rate of the best so far after each round."""
    fig, ax = figure()
    for i, (name, rates) in enumerate(by_arm.items()):
        colour = COLOURS[i % len(COLOURS)]
        ax.plot(range(len(rates)), [r * 100 for r in rates], marker="o", color=colour, label=name, clip_on=False)
    depth = max((len(rates) for rates in by_arm.values()), default=1)
    ax.set_xticks(range(depth))  # rounds are whole numbers, not the axis's default quarter steps
    ax.set_xlabel("round (0 = first draft)")
    percent_axis(ax, "graded pass rate (held out), best so far")
    ax.set_title("Graded pass rate after each round", fontsize=10)
    ax.legend(fontsize=7)
    return fig


def flip_bars(by_arm: dict[str, tuple[float, float]]) -> Figure:
    """Per arm: the share of revisions that turned a failing answer into a passing one, and the reverse."""
    fig, ax = figure()
    names = list(by_arm)
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], [by_arm[n][0] * 100 for n in names], width=0.4, color=BLUE, label="fixed")
    ax.bar([x + 0.2 for x in xs], [by_arm[n][1] * 100 for n in names], width=0.4, color=ORANGE, label="broke")
    ax.set_xticks(list(xs), names, rotation=20, fontsize=8)
    percent_axis(ax, "% of revisions (by the held-out grade)")
    ax.set_title("What revisions did, by the grade: fail → pass and pass → fail", fontsize=10)
    ax.legend(fontsize=8)
    return fig
