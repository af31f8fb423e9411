"""How a run's calls were spent, as pages show it: ``report.html`` and ``comparison.html`` (one per arm).

The rows come from `redraft.rundir.spending` (each draft's `Intent` and its
verification, read from the frames): per feedback state and action, the calls,
what they raised, and what a call bought; and how the choice moved over the batch,
the tasks in the order they finished, in quarters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import get_args

from redraft.protocols.messages import Action
from redraft.rundir.spending import Spent, over_the_batch, spending_table

TABLE_HEADER = [
    "feedback state",
    "action",
    "calls",
    "drafts",
    "critiques",
    "drafts judged",
    "raised the best",
    "raised per call",
]
PARTS_HEADER = ["tasks (in the order they finished)", *get_args(Action)]


@dataclass(frozen=True)
class SpendingView:
    """The rows of the two tables, and the calls of each action per part of the batch (for the plot)."""

    rows: Sequence[tuple[str, ...]]
    parts: Sequence[tuple[str, ...]]
    counts: Sequence[dict[str, int]]
    labels: list[str]


def spending_view(tasks: Sequence[Sequence[Spent]]) -> SpendingView | None:
    """The view of ``tasks``' calls (each task's, in the order they finished); None if no call had an intent."""
    tasks = [t for t in tasks if t]
    if not tasks:
        return None
    rows = [
        (
            r.state,
            r.action,
            f"{r.calls:,}",
            f"{r.drafts:,}",
            f"{r.critiques:,}",
            f"{r.judged:,}",
            f"{r.raised:,}",
            f"{r.raised_per_call:.2f}",
        )
        for r in spending_table([s for task in tasks for s in task])
    ]
    parts = over_the_batch(tasks)
    labels = [f"{share.start + 1:,}–{share.stop:,}" for share, _ in parts]
    counts: list[dict[str, int]] = [{a: part[a] for a in get_args(Action)} for _, part in parts]
    table = [(label, *(f"{c[a]:,}" for a in get_args(Action))) for label, c in zip(labels, counts, strict=True)]
    return SpendingView(rows=rows, parts=table, counts=counts, labels=labels)
