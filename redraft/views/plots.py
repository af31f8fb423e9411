"""The report's plots, drawn with matplotlib's Agg canvas (no pyplot, no display); `png` makes one PNG bytes.

Each function takes figures already aggregated (never per-task data), so drawing
costs the same for a run of ten tasks or of a hundred thousand, and returns the
`Figure`, whose axes a test can read.

Every plot says what it shows: a pass rate is the held-out graded one or the
feedback's (what the loop itself saw), labelled in the legend, never one under
the other's name, on an axis from 0 to 100 % (`percent_axis`); an axis of
counts has whole-number ticks only (`count_axis`).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from redraft.errors import missing_extra

try:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator, PercentFormatter
except ModuleNotFoundError:
    raise missing_extra("Plots (redraft report, redraft compare)", "report") from None

WIDTH, HEIGHT, DPI = 5.2, 3.1, 100
BLUE, ORANGE, GREY = "#2f6db5", "#e07b28", "#c9d3df"
GRADED = "graded pass rate (held out)"
FEEDBACK = "feedback pass rate (what the loop saw)"


def pass_rate_by_round(
    feedback: Sequence[float], graded: Sequence[float] | None, active: Sequence[float], *, graded_tasks: int = 0
) -> Figure:
    """Per round, of the best so far: the graded pass rate (of the ``graded_tasks``; None: no task had a grade)
    and the feedback's pass rate (of every task), over the share of tasks still being refined."""
    fig, ax = figure(height=HEIGHT + 0.5)
    rounds = list(range(len(feedback)))
    ax.bar(rounds, [a * 100 for a in active], color=GREY, width=0.6, label="tasks still refining")
    if graded is None:
        ax.plot([], [], color=BLUE, marker="o", label=f"{GRADED}: no grades (no task had gold)")
    else:
        line = [g * 100 for g in graded]
        label = f"{GRADED}, of {graded_tasks:,} graded tasks"
        ax.plot(rounds, line, color=BLUE, marker="o", linewidth=2, label=label, clip_on=False, zorder=3)
    line = [f * 100 for f in feedback]
    ax.plot(rounds, line, color=ORANGE, marker="s", linestyle="--", linewidth=2, label=FEEDBACK, clip_on=False)
    ax.set_xticks(rounds)
    ax.set_xlabel("round (0 = first draft)")
    percent_axis(ax, "% of tasks, best so far")
    ax.set_title("Pass rate per round, graded and feedback\n(a task that stopped keeps its final state)", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, fontsize=7, frameon=False)
    return fig


def score_distribution(edges: Sequence[float], before: Sequence[int], after: Sequence[int]) -> Figure:
    """Side-by-side histograms of the round-0 feedback score and the refined one."""
    fig, ax = figure()
    centres = [(edges[i] + edges[i + 1]) / 2 for i in range(len(before))]
    width = (edges[1] - edges[0]) * 0.4
    ax.bar([c - width / 2 for c in centres], before, width=width, color=GREY, edgecolor="#8a97a8", label="round 0")
    ax.bar([c + width / 2 for c in centres], after, width=width, color=BLUE, label="refined (best)")
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel("feedback score (the verifier's)")
    ax.set_ylabel("tasks")
    count_axis(ax.yaxis)
    ax.set_title("Feedback score before and after refinement", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def horizontal_bars(counts: dict[str, int], title: str, xlabel: str) -> Figure:
    """One bar per key, largest at the top (stop reasons): counts, on a whole-number axis."""
    items = sorted(counts.items(), key=lambda kv: kv[1])
    fig, ax = figure(height=max(1.8, 0.45 * len(items) + 1.1))
    ax.barh([k for k, _ in items], [v for _, v in items], color=BLUE)
    for i, (_, v) in enumerate(items):
        ax.annotate(f"{v:,}", (v, i), textcoords="offset points", xytext=(4, 0), va="center", fontsize=9)
    ax.set_xlabel(xlabel)
    count_axis(ax.xaxis)
    ax.set_title(title, fontsize=10)
    ax.margins(x=0.15)
    return fig


def tokens_by_role(roles: dict[str, tuple[int, int]]) -> Figure:
    """Stacked input and output tokens per role."""
    names = sorted(roles)
    fig, ax = figure(height=max(1.8, 0.5 * len(names) + 1.2))
    inputs = [roles[n][0] for n in names]
    outputs = [roles[n][1] for n in names]
    ax.barh(names, inputs, color=GREY, edgecolor="#8a97a8", label="input")
    ax.barh(names, outputs, left=inputs, color=ORANGE, label="output")
    ax.set_xlabel("tokens")
    count_axis(ax.xaxis)
    ax.set_title("Tokens per role", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.margins(x=0.05)
    return fig


def figure(width: float = WIDTH, height: float = HEIGHT) -> tuple[Figure, Axes]:
    """A figure with one set of axes, on the Agg canvas, in the reports' style."""
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)  # Agg, drawn in memory: no pyplot, no display, no figure kept alive after use
    ax = fig.add_subplot()
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", alpha=0.3)
    return fig, ax


def percent_axis(ax: Axes, label: str) -> None:
    """The y axis as a share of 0 to 100 % (the data are in percent), whatever the data reach."""
    ax.set_ylim(0, 100)
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=100, decimals=0))
    ax.set_ylabel(label)


def count_axis(axis: Axis) -> None:
    """Whole-number ticks only: a count of tasks or tokens has no "1.5"."""
    axis.set_major_locator(MaxNLocator(integer=True))


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def calls_over_the_batch(labels: Sequence[str], counts: Sequence[dict[str, int]]) -> Figure:
    """Stacked calls per action (fresh, revise, critique) in each part of the batch, first part at the top."""
    fig, ax = figure(height=max(1.8, 0.45 * len(labels) + 1.3))
    rows = list(range(len(labels)))[::-1]
    left = [0] * len(labels)
    for action, colour in zip(("fresh", "revise", "critique"), (GREY, BLUE, ORANGE), strict=True):
        values = [c.get(action, 0) for c in counts]
        ax.barh(rows, values, left=left, color=colour, label=action)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_yticks(rows, labels)
    ax.set_ylabel("tasks, in the order they finished")
    ax.set_xlabel("model calls")
    count_axis(ax.xaxis)
    ax.set_title("How the calls were spent over the batch", fontsize=10, pad=22)
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)  # above the bars
    ax.margins(x=0.05)
    return fig
