"""One line per directory on the viewer's first page: its kind, state, tasks done of total, pass rates by their
basis, cost and wall time.

A finished run's figures are its ``summary.json``'s (read, not recomputed: the list opens at once however long
the runs); a run still going, or interrupted, is counted from its records (`redraft.viewer._index`), which the
viewer keeps. Each pass rate names its basis: *feedback* (the loop's own verdict), *graded* (the held-out
grade), *judged* (a judge's grade, the run's ``--judge``), *human* (people's latest labels).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from redraft.rundir import RUN, RunReader
from redraft.rundir.layout import MANIFEST, read_object
from redraft.viewer._catalog import Found, State, run_state, total_tasks, writer_alive
from redraft.viewer._index import Row


@dataclass(frozen=True)
class Rate:
    basis: str
    passed: int
    of: int

    @property
    def said(self) -> str:
        return f"{self.passed / self.of:.1%} {self.basis} ({self.passed:,}/{self.of:,})" if self.of else ""


@dataclass(frozen=True)
class Card:
    """A directory as the list shows it."""

    found: Found
    state: State | None
    """None for a kind with no state of its own to show (a judge card)."""
    done: int = 0
    total: int | None = None
    rates: list[Rate] = field(default_factory=list)
    cost_usd: float = 0.0
    wall_s: float = 0.0
    strategy: str = ""
    scenario: str = ""
    href: str = ""
    """Where the list links it (the server's or the bundle's)."""

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.found.modified))


def judged(path: Path) -> bool:
    """Whether a run's grades are a judge's (its config names one)."""
    return bool((read_object(path / MANIFEST).get("config") or {}).get("judge"))


def run_card(found: Found, rows: list[Row] | None, human: tuple[int, int]) -> Card:
    """A run's card; ``rows`` its rows (None: read its summary, it is finished); ``human`` (passed, labelled)."""
    config = read_object(found.path / MANIFEST).get("config") or {}
    basis = "judged" if config.get("judge") else "graded"
    saved = RunReader(found.path).saved_summary()
    if rows is None and saved is not None:
        rates = [Rate("feedback", saved.passed, saved.tasks), Rate(basis, saved.graded_passed, saved.graded)]
        done, cost, wall = saved.tasks, saved.usage.cost_usd, saved.wall_s
        state: State = "finished"
    else:
        rows = rows or []
        rates = _rates(rows, basis)
        done, cost = len(rows), sum(r.cost_usd for r in rows)
        wall = saved.wall_s if saved is not None else float(read_object(found.path / MANIFEST).get("wall_s", 0.0))
        state = run_state(found.path, done)
    rates.append(Rate("human", *human))
    return Card(
        found,
        state,
        done=done,
        total=total_tasks(found.path),
        rates=[r for r in rates if r.of],
        cost_usd=cost,
        wall_s=wall,
        strategy=str(config.get("strategy") or ""),
        scenario=str(config.get("scenario") or ""),
    )


def needs_rows(found: Found) -> bool:
    """Whether a run's card is counted from its records: it is being written, or its summary is not its last."""
    if found.kind is not RUN:
        return False
    saved = RunReader(found.path).saved_summary()
    return saved is None or writer_alive(found.path) or saved.tasks != RunReader(found.path).count()


def other_card(found: Found) -> Card:
    """A comparison's, a tune's or a judge card's line: its state (a live writer or not) and when it changed."""
    if found.kind.name == "judge card":
        return Card(found, None)
    return Card(found, "running" if writer_alive(found.path) else "finished")


def _rates(rows: list[Row], basis: str) -> list[Rate]:
    graded = [r for r in rows if r.graded_pass is not None]
    return [
        Rate("feedback", sum(r.passed for r in rows), len(rows)),
        Rate(basis, sum(bool(r.graded_pass) for r in graded), len(graded)),
    ]
