"""The report's plots, drawn with matplotlib's Agg canvas (no pyplot, no display) and returned as PNG bytes.

Each function takes figures already aggregated (never per-task data), so drawing
costs the same for a run of ten tasks or of a hundred thousand.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

WIDTH, HEIGHT, DPI = 5.2, 3.1, 100
BLUE, ORANGE, GREY = "#2f6db5", "#e07b28", "#c9d3df"


def pass_rate_by_round(pass_rate: Sequence[float], active: Sequence[float]) -> bytes:
    """Cumulative pass rate after each round, over the share of tasks still being refined."""
    fig, ax = figure()
    rounds = list(range(len(pass_rate)))
    ax.bar(rounds, [a * 100 for a in active], color=GREY, width=0.6, label="tasks still refining in this round")
    ax.plot(rounds, [p * 100 for p in pass_rate], color=BLUE, marker="o", linewidth=2, label="pass rate (best so far)")
    for r, p in zip(rounds, pass_rate, strict=True):
        ax.annotate(
            f"{p:.1%}".replace(".0%", "%"),
            (r, p * 100),
            textcoords="offset points",
            xytext=(0, 7),
            ha="center",
            fontsize=9,
        )
    ax.set_xticks(rounds)
    ax.set_xlabel("round (0 = first draft)")
    ax.set_ylabel("% of tasks")
    ax.set_ylim(0, 128)
    ax.set_title("Pass rate per round\n(a task that stopped keeps its final state)", fontsize=10)
    ax.legend(loc="upper center", ncol=2, fontsize=8, framealpha=0.9)
    return png(fig)


def score_distribution(edges: Sequence[float], before: Sequence[int], after: Sequence[int]) -> bytes:
    """Side-by-side histograms of the round-0 score and the refined score."""
    fig, ax = figure()
    centres = [(edges[i] + edges[i + 1]) / 2 for i in range(len(before))]
    width = (edges[1] - edges[0]) * 0.4
    ax.bar([c - width / 2 for c in centres], before, width=width, color=GREY, edgecolor="#8a97a8", label="round 0")
    ax.bar([c + width / 2 for c in centres], after, width=width, color=BLUE, label="refined (best)")
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel("verifier score")
    ax.set_ylabel("tasks")
    ax.set_title("Score distribution before and after refinement", fontsize=10)
    ax.legend(fontsize=8)
    return png(fig)


def horizontal_bars(counts: dict[str, int], title: str, xlabel: str) -> bytes:
    """One bar per key, largest at the top (stop reasons)."""
    items = sorted(counts.items(), key=lambda kv: kv[1])
    fig, ax = figure(height=max(1.8, 0.45 * len(items) + 1.1))
    ax.barh([k for k, _ in items], [v for _, v in items], color=BLUE)
    for i, (_, v) in enumerate(items):
        ax.annotate(f"{v:,}", (v, i), textcoords="offset points", xytext=(4, 0), va="center", fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.margins(x=0.15)
    return png(fig)


def tokens_by_role(roles: dict[str, tuple[int, int]]) -> bytes:
    """Stacked input and output tokens per role."""
    names = sorted(roles)
    fig, ax = figure(height=max(1.8, 0.5 * len(names) + 1.2))
    inputs = [roles[n][0] for n in names]
    outputs = [roles[n][1] for n in names]
    ax.barh(names, inputs, color=GREY, edgecolor="#8a97a8", label="input")
    ax.barh(names, outputs, left=inputs, color=ORANGE, label="output")
    ax.set_xlabel("tokens")
    ax.set_title("Tokens per role", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.margins(x=0.05)
    return png(fig)


def figure(width: float = WIDTH, height: float = HEIGHT) -> tuple[Figure, Axes]:
    """A figure with one set of axes, on the Agg canvas, in the reports' style."""
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)  # Agg, drawn in memory: no pyplot, no display, no figure kept alive after use
    ax = fig.add_subplot()
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", alpha=0.3)
    return fig, ax


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()
