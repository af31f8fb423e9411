"""The comparison's plots, on matplotlib's Agg canvas, returned as `Figure` s (`redraft.views.plots.png` makes
the PNG), under the report's rules: every pass rate here says its basis (the held-out grade, or the feedback
when nothing was held out), on a 0–100 % axis (`percent_axis`). An oracle arm (fed the grade) is named so
wherever it is drawn (`arm_label`), with a hollow marker or a dotted line of its own, and is never drawn as on
the Pareto front. On the cost plane each arm has a marker of its own, arms that fall on one point are set
side by side (`dodged`) so none hides another, and the legend sits outside the data."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from redraft.views.plots import BLUE, GREY, ORANGE, figure, percent_axis

if TYPE_CHECKING:  # matplotlib is the report extra's: loaded where a plot is drawn
    from matplotlib.figure import Figure

COLOURS = ["#2f6db5", "#e07b28", "#18794e", "#b42318", "#6b4fbb", "#8c6d1f", "#0f7c8c", "#c2185b"]
MARKERS = ["o", "s", "^", "v", "P", "X", "h", "<"]
"""An arm's own marker (an oracle arm's is a hollow diamond, an arm on the Pareto front's a star)."""
DODGE = 0.025
"""How far apart arms on one point are set, as a share of the cost axis's span."""

ORACLE = "(oracle: fed the grade)"


@dataclass(frozen=True)
class ArmPoint:
    """One arm on the cost plane."""

    name: str
    cost: float
    rate: float
    """Graded pass rate, with its 95 % interval from ``low`` to ``high``."""
    low: float
    high: float
    front: bool
    """On the Pareto front (never an oracle arm)."""
    oracle: bool


def arm_label(name: str, oracle: bool) -> str:
    return f"{name} {ORACLE}" if oracle else name


CurveLine = tuple[str, Sequence[float], Sequence[float]]
"""(name, cost at n = 1..N, pass rate at n = 1..N)."""


def cost_plane(
    arms: Sequence[ArmPoint], curves: Sequence[CurveLine], cost_label: str, rate: str = "graded pass rate (held out)"
) -> Figure:
    """Each arm's pass rate (with its 95 % interval) at its cost, over the sampling baselines' curves."""
    fig, ax = figure(width=8.4, height=4.0)
    for (name, costs, rates), style in zip(curves, ("-", "--"), strict=False):
        ax.plot(costs, [r * 100 for r in rates], style, color=GREY, linewidth=2, label=f"baseline: {name}")
    xs = dodged(arms, [c for _, costs, _ in curves for c in costs])
    for i, (arm, x) in enumerate(zip(arms, xs, strict=True)):
        marker, size = ("D", 8) if arm.oracle else ("*", 12) if arm.front else (MARKERS[i % len(MARKERS)], 7)
        ax.errorbar(
            [x],
            [arm.rate * 100],
            yerr=[[max(arm.rate - arm.low, 0) * 100], [max(arm.high - arm.rate, 0) * 100]],
            fmt=marker,
            markersize=size,
            markerfacecolor="none" if arm.oracle else None,
            color=COLOURS[i % len(COLOURS)],
            capsize=4,
            label=arm_label(arm.name, arm.oracle) + (" (Pareto front)" if arm.front else ""),
            clip_on=False,
        )
    ax.set_xlabel(cost_label)
    percent_axis(ax, f"{rate}, % of tasks")
    ax.set_title(f"{rate.split(' (')[0].capitalize()} against cost: arms (95% CI) over sampling", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # beside the data
    return fig


def dodged(arms: Sequence[ArmPoint], others: Sequence[float] = ()) -> list[float]:
    """Each arm's x: its cost, with arms that share a point (cost and rate) set `DODGE` of the axis's span apart,
    centred on it, so that no marker hides another; ``others``: the other costs on the axis (its span)."""
    xs = [arm.cost for arm in arms]
    finite = [x for x in [*xs, *others] if math.isfinite(x)]
    span = (max(finite) - min(finite)) if finite else 0.0
    step = DODGE * (span or max((abs(x) for x in finite), default=0.0) or 1.0)
    points: dict[tuple[float, float], list[int]] = {}
    for i, arm in enumerate(arms):
        points.setdefault((arm.cost, arm.rate), []).append(i)
    for shared in points.values():
        for k, i in enumerate(shared):
            xs[i] += (k - (len(shared) - 1) / 2) * step
    return xs


def rounds_lines(
    by_arm: Mapping[str, Sequence[float]],
    oracles: frozenset[str] = frozenset(),
    rate: str = "graded pass rate (held out)",
) -> Figure:
    """Each arm's graded pass rate of the best so far after each round; ``oracles``: the arms fed the grade."""
    fig, ax = figure()
    for i, (name, rates) in enumerate(by_arm.items()):
        oracle = name in oracles
        ax.plot(
            range(len(rates)),
            [r * 100 for r in rates],
            marker="D" if oracle else "o",
            linestyle=":" if oracle else "-",
            color=COLOURS[i % len(COLOURS)],
            label=arm_label(name, oracle),
            clip_on=False,
        )
    depth = max((len(rates) for rates in by_arm.values()), default=1)
    ax.set_xticks(range(depth))  # rounds are whole numbers, not the axis's default quarter steps
    ax.set_xlabel("round (0 = first draft)")
    percent_axis(ax, f"{rate}, best so far")
    ax.set_title(f"{rate.split(' (')[0].capitalize()} after each round", fontsize=10)
    ax.legend(fontsize=7)
    return fig


def flip_bars(
    by_arm: dict[str, tuple[float, float]], oracles: frozenset[str] = frozenset(), by: str = "the held-out grade"
) -> Figure:
    """Per arm: the share of revisions (of a round's, averaged over rounds) after which the kept best answer
    turned from failing to passing, and the reverse, judged by ``by``. A share of revisions, not of tasks (the end
    table counts tasks); only kept answers count, as in the end table."""
    fig, ax = figure()
    names = list(by_arm)
    xs = range(len(names))
    fixed, broke = [by_arm[n][0] * 100 for n in names], [by_arm[n][1] * 100 for n in names]
    ax.bar([x - 0.2 for x in xs], fixed, width=0.4, color=BLUE, label="fixed: kept answer fail → pass")
    ax.bar([x + 0.2 for x in xs], broke, width=0.4, color=ORANGE, label="broke: kept answer pass → fail")
    ax.set_xticks(list(xs), [arm_label(n, n in oracles) for n in names], rotation=20, fontsize=8)
    percent_axis(ax, f"% of a round's revisions, by {by}")
    ax.set_title(f"What revisions did (share of revisions, not of tasks), by {by}", fontsize=10)
    ax.legend(fontsize=8)
    return fig
