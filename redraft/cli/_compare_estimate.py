"""``redraft compare --dry-run``: every lane of the comparison (each arm at each repeat, and the baseline)
estimated as ``redraft run --dry-run`` estimates a run, in one table, wall time first; nothing runs, nothing is
written, no Ray starts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from redraft.cli._estimate import warnings

if TYPE_CHECKING:  # the engine is loaded by the command that estimates, not by `redraft --help`
    from redraft.engine.estimate import Estimate


def estimate_comparison(
    scenario: str,
    settings: dict[str, Any],
    arms: str | None,
    arms_file: Path | None,
    baseline_samples: int | None,
    repeats: int,
    console: Console,
) -> None:
    """Estimate each lane of the comparison the command line describes, print one table and stop."""
    from redraft.actors import estimate
    from redraft.cli._compare import make_plan

    plan = make_plan(scenario, settings, arms, arms_file, baseline_samples, repeats)
    lanes = [lane for lane, _ in plan.resolved()]  # every arm checked, as the comparison would, before any estimate
    made = [(lane.label, estimate(lane.config), lane.config) for lane in lanes]
    console.print(
        Text(f"estimate: compare {plan.base.experiment.scenario}, {len(lanes)} lanes (the arms, the baseline)")
    )
    console.print(_table([(label, one) for label, one, _ in made]))
    for line in _assumptions([(label, one) for label, one, _ in made]):
        console.print(Text(f"- {line}"))
    for label, one, config in made:
        for line in warnings(one, config):
            print(line.replace("redraft: warning: ", f"redraft: warning: {label}: ", 1), file=sys.stderr)
    print("dry run: no model was called and nothing was written; leave out --dry-run to run it", file=sys.stderr)


def _assumptions(made: list[tuple[str, Estimate]]) -> list[str]:
    """Each lane's assumptions once: one that not every lane shares is named with the lanes it is theirs."""
    lines: dict[str, list[str]] = {}
    for label, one in made:
        for line in one.assumptions:
            lines.setdefault(line, []).append(label)
    said = [line if len(labels) == len(made) else f"{', '.join(labels)}: {line}" for line, labels in lines.items()]
    return [*said, "all lanes: their times added (they share the machine's model hosts and cores), their money added"]


def _table(made: list[tuple[str, Estimate]]) -> Table:
    """A row per lane and one for all of them: wall time, calls, and USD where a model costs money."""
    paid = not all(one.free for _, one in made)
    table = Table()
    table.add_column("lane", no_wrap=True)
    headings = ["tasks", "time expected", "time at worst", "calls expected", "calls at most"]
    for heading in headings + (["USD expected", "USD at worst"] if paid else []):
        table.add_column(heading, justify="right")
    for label, one in made:
        usd = [one.usd(one.expected.total), one.usd(one.worst.total)] if paid else []
        table.add_row(Text(label), f"{one.tasks:,}", *_figures([one]), *usd)
    everything = [one for _, one in made]
    usd = [f"${sum(one.expected.total.cost_usd for one in everything):,.4f}"] if paid else []
    usd += [f"${sum(one.worst.total.cost_usd for one in everything):,.4f}"] if paid else []
    table.add_row(Text("all lanes", style="bold"), "", *_figures(everything), *usd)
    return table


def _figures(lanes: list[Estimate]) -> list[str]:
    """The lanes' wall time, expected and at worst, then their calls, expected and at most: each summed."""
    from redraft.engine.estimate import duration

    return [
        duration(sum(one.wall(one.expected) for one in lanes)),
        duration(sum(one.wall(one.worst) for one in lanes)),
        f"{sum(one.expected.total.calls for one in lanes):,}",
        f"{sum(one.worst.total.calls for one in lanes):,}",
    ]
