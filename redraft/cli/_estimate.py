"""A run's estimate in the terminal: the table ``redraft run --dry-run`` prints, and the line a paid run prints
before it starts, each with a warning for every run budget the worst case is over."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from redraft.protocols.messages import Usage

if TYPE_CHECKING:  # the engine is loaded by the command that estimates, not by `redraft --help`
    from redraft.config import RunConfig
    from redraft.engine.estimate import Estimate, Spend


def show_estimate(estimate: Estimate, config: RunConfig, console: Console) -> None:
    """The whole estimate: a row per case and per role, how each was made, and the budgets it is over."""
    e = config.experiment
    k = estimate.samples
    rounds = f"{k} draft{_s(k)} a round, up to {e.max_rounds} round{_s(e.max_rounds)}"
    title = f"estimate: {e.scenario}, {estimate.tasks:,} task{_s(estimate.tasks)}, {e.strategy}, {rounds}"
    console.print(Text(title))
    table = Table()
    table.add_column("")
    for heading in ("wall time", "calls", "tokens in", "tokens out", *(() if estimate.free else ("USD",))):
        table.add_column(heading, justify="right")
    cases = (("all pass at once", estimate.first_pass), ("expected", estimate.expected))
    for label, spend in (*cases, ("worst case", estimate.worst)):
        _rows(table, estimate, label, spend, by_role=label != cases[0][0])
    console.print(table)
    for line in estimate.assumptions:
        console.print(Text(f"- {line}"))


def _rows(table: Table, estimate: Estimate, label: str, spend: Spend, *, by_role: bool) -> None:
    """A case's total, then (``by_role``) each role's share, named with its model (a name is never markup)."""
    from redraft.engine.estimate import duration

    table.add_row(Text(label, style="bold"), duration(estimate.wall(spend)), *_figures(estimate, spend.total))
    roles = [*estimate.models, *(role for role in spend.by_role if role not in estimate.models)]
    for role in roles if by_role else ():
        usage, model = spend.by_role.get(role, Usage()), estimate.models.get(role, "")
        table.add_row(Text(f"  {role} {model}"), "", *_figures(estimate, usage, role if model else None))


def _figures(estimate: Estimate, usage: Usage, role: str | None = None) -> list[str]:
    cells = [f"{usage.calls:,}", f"{usage.input_tokens:,}", f"{usage.output_tokens:,}"]
    return cells if estimate.free else [*cells, estimate.usd(usage, role)]


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def warnings(estimate: Estimate, config: RunConfig) -> list[str]:
    """``redraft: warning: ...`` for each run budget the worst case is over."""
    return [f"redraft: warning: {line}" for line in estimate.over_budget(config.budgets)]


def said_before(made: Estimate, config: RunConfig, expect: Callable[[Estimate], None]) -> None:
    """Before a run: its estimate to ``expect`` (the progress line's ETA from calls); and where its models cost
    money, the estimate in one line, and a warning per budget it is over."""
    expect(made)
    if made.free:
        return
    if made.tasks:
        print(f"redraft: {made.summary()} (--dry-run shows how)", file=sys.stderr)
    for line in warnings(made, config):
        print(line, file=sys.stderr)
