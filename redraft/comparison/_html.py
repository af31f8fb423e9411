"""``comparison.html`` and the terminal table: a comparison to look at, not only to read.

The page is self-contained like ``report.html`` (plots embedded as PNGs, inline
CSS, nothing fetched), rendered from an autoescaping template
(``comparison.html.j2``): the pass-rate-against-cost plane with each arm's
95 % interval over the baselines' curves (the Pareto front marked), the pass rate
after each round per arm, and what the revisions and critics did; then the
tables of ``comparison.json`` and a link to each arm's own report. An oracle arm
(fed the held-out grade) is marked "(oracle)" in every table, row and plot, and
is kept off the Pareto front (`pareto`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from redraft.comparison._analysis import ArmFigures, Comparison, Curve, Difference
from redraft.comparison._charts import ArmPoint, cost_plane, flip_bars, rounds_lines
from redraft.comparison._runner import BASELINE
from redraft.views import PARTS_HEADER, TABLE_HEADER, SpendingView
from redraft.views.plots import png
from redraft.views.templating import render

if TYPE_CHECKING:  # matplotlib is the report extra's: loaded where a plot is drawn
    from matplotlib.figure import Figure

COMPARISON_HTML = "comparison.html"
COST_LABELS = {"calls": "model calls per task", "tokens": "tokens per task", "usd": "USD per task"}
TEST_NAMES = {"exact_mcnemar": "exact McNemar", "paired_t": "paired t"}


def arm_cost(arm: ArmFigures, match: str) -> float:
    return {"calls": arm.mean_calls, "tokens": arm.mean_tokens, "usd": arm.mean_usd}[match]


def curve_costs(curve: Curve, match: str) -> list[float]:
    unit = {"calls": curve.mean_calls_per_sample, "tokens": curve.mean_tokens_per_sample}.get(
        match, curve.mean_usd_per_sample
    )
    return [n * unit for n in range(1, curve.samples + 1)]


def pareto(comparison: Comparison) -> list[str]:
    """The arms no other arm or baseline point beats on both cost and graded pass rate.

    Oracle arms are left out on both sides: fed the grade, they are not a result to be on the front, nor a
    point that could push a real arm off it.
    """
    match = comparison.match
    real = [a for a in comparison.arms if not a.oracle]
    points = [(arm_cost(a, match), a.pass_rate) for a in real]
    for curve in comparison.baselines:
        points += list(zip(curve_costs(curve, match), curve.pass_rate, strict=True))
    front = []
    for arm in real:
        cost, rate = arm_cost(arm, match), arm.pass_rate
        dominated = any(c <= cost and r >= rate and (c, r) != (cost, rate) for c, r in points)
        if not dominated and math.isfinite(rate):
            front.append(arm.name)
    return front


def terminal_rows(comparison: Comparison) -> list[list[str]]:
    """The lanes table: each arm's pass rate (graded, or the feedback's) with its interval, cost, and against the
    matched baselines; then each baseline's own at its N samples per task, with its interval and cost
    (`baseline_rows`).

    Figures and their intervals (in percentage points) on separate lines, so the table fits 80 columns.
    """
    return arm_rows(comparison) + baseline_rows(comparison)


def lane_names(comparison: Comparison) -> list[str]:
    """The lane of each of `terminal_rows`, in order: an arm's name, or the baselines' lane."""
    return [a.name for a in comparison.arms] + [BASELINE for c in comparison.baselines if c.samples]


def baseline_rows(comparison: Comparison) -> list[list[str]]:
    """Each baseline as a lane of the table: its pass rate at N samples per task, its interval, its cost per
    task at N and its lane's cost in all (no feedback pass of its own, and nothing to be matched against)."""
    rows = []
    for curve in comparison.baselines:
        if not curve.samples:
            continue
        rate, n = curve.pass_rate[-1], curve.samples
        interval = f"\n[{curve.ci[-1].low * 100:.1f}, {curve.ci[-1].high * 100:.1f}]" if curve.ci else ""
        rows.append(
            [
                f"{curve.name}\n(baseline, n={n})",
                f"{rate:.1%}{interval}",
                "-",
                f"{n * curve.mean_calls_per_sample:.1f}",
                f"{n * curve.mean_tokens_per_sample:,.0f}",
                f"${curve.total_usd:,.4f}",
                "-",
                "-",
            ]
        )
    return rows


def arm_rows(comparison: Comparison) -> list[list[str]]:
    """The arms' rows of `terminal_rows`."""
    ceiling = min((c.samples for c in comparison.baselines), default=0)
    rows = []
    for arm in comparison.arms:
        against = {d.b: d for d in comparison.against_baselines if d.a == arm.name}
        rows.append(
            [
                f"{arm.name}\n(oracle)" if arm.oracle else arm.name,
                f"{arm.pass_rate:.1%}\n[{arm.ci.low * 100:.1f}, {arm.ci.high * 100:.1f}]",
                f"{arm.feedback_pass_rate:.1%}",
                f"{arm.mean_calls:.1f}",
                f"{arm.mean_tokens:,.0f}",
                f"${arm.total_usd:,.4f}",
                _against(against.get("best_of_n"), ceiling),
                _against(against.get("self_consistency"), ceiling),
            ]
        )
    return rows


def terminal_header(comparison: Comparison) -> list[str]:
    """The arms table's header: the pass rate named by its basis (graded only when a held-out grade exists)."""
    return [
        "arm",
        f"{comparison.rate_name.removesuffix(' rate')}\n[95% CI]",
        "feedback\npass",
        "calls\n/task",
        "tokens\n/task",
        "cost",
        "vs best-of-n\n(matched)",
        "vs self-cons.\n(matched)",
    ]


def _against(difference: Difference | None, ceiling: int) -> str:
    """The difference, its interval, and the baseline's n actually used: the matched budget, or N when it is
    held there (the notes say so)."""
    if difference is None:
        return "-"
    noise = "" if difference.significant else " (noise)"
    text = f"{difference.mean:+.1%}{noise}\n[{difference.ci.low * 100:+.1f}, {difference.ci.high * 100:+.1f}]"
    budget = difference.budget
    if budget is None or not math.isfinite(budget):
        return text
    held = ceiling and budget > ceiling
    return text + (f"\n@n={ceiling} (held)" if held else f"\n@n={budget:.1f}")


def charts(comparison: Comparison, front: list[str]) -> list[tuple[Figure, str]]:
    """The page's plots, each with its caption; ``front``: the arms on the Pareto front."""
    match = comparison.match
    rate, name = f"{comparison.rate_name} ({comparison.rate_source})", comparison.rate_name
    oracles = frozenset(a.name for a in comparison.arms if a.oracle)
    plane = cost_plane(
        [
            ArmPoint(a.name, arm_cost(a, match), a.pass_rate, a.ci.low, a.ci.high, a.name in front, a.oracle)
            for a in comparison.arms
        ],
        [(c.name, curve_costs(c, match), c.pass_rate) for c in comparison.baselines],
        COST_LABELS[match],
        rate,
    )
    by_round = {a.name: a.pass_rate_by_round for a in comparison.arms}
    fixed_and_broke = {a.name: (_mean_rate(a.fixed_by_round), _mean_rate(a.broken_by_round)) for a in comparison.arms}
    by = judged_by(comparison)
    return [
        (plane, f"{name} against cost, arms over the sampling baselines"),
        (rounds_lines(by_round, oracles, rate), f"{name} after each round"),
        (
            flip_bars(fixed_and_broke, oracles, by),
            f"share of revisions after which the kept answer was fixed or broken, by {by} (a share of revisions, "
            "not of tasks)",
        ),
    ]


def judged_by(comparison: Comparison) -> str:
    """What judged each candidate, in words: the held-out grade (a judge's), or the feedback when nothing was held
    out."""
    if comparison.basis != "grade":
        return "the feedback (no held-out grade)"
    return "the held-out grade" if comparison.judge is None else f"the judge {comparison.judge.judge}"


def write_html(
    comparison: Comparison, out: Path, reports: dict[str, str], spending: dict[str, SpendingView] | None = None
) -> Path:
    """``comparison.html`` under ``out``; ``reports``: each arm's report page, relative to ``out``; ``spending``:
    how the calls were spent, by lane, for the lanes whose strategy chose its calls."""
    front = pareto(comparison)
    plots = [(png(fig), caption) for fig, caption in charts(comparison, front)]
    path = out / COMPARISON_HTML
    page = render(
        "comparison.html.j2",
        title=f"redraft comparison · {out.name}",
        comparison=comparison,
        plots=plots,
        front=front,
        reports=reports,
        header=terminal_header(comparison),
        judged_by=judged_by(comparison),
        rows=list(zip(lane_names(comparison), terminal_rows(comparison), strict=True)),
        oracles={a.name for a in comparison.arms if a.oracle},
        cost_label=COST_LABELS[comparison.match],
        tests=TEST_NAMES,
        spending=spending or {},
        spending_header=TABLE_HEADER,
        parts_header=PARTS_HEADER,
    )
    path.write_text(page, encoding="utf-8")
    return path


def _mean_rate(by_round: dict[str, float | None]) -> float:
    rates = [r for r in by_round.values() if r is not None]
    return sum(rates) / len(rates) if rates else 0.0
