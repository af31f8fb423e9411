"""The viewer's pages, rendered from the directories under its root: what the server answers and the bundle
writes alike (`redraft.viewer._links` tells them apart).

Templates are the report's (`redraft.views.templating`: its base, macros, filters and its task page) beside the
viewer's own (``templates/``), in one environment with autoescaping on: model text, task ids and people's
comments reach a page only through ``{{ }}``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from redraft.errors import UserError
from redraft.rundir import COMPARISON, RUN, Frame, RunReader, TaskEntry, build_history
from redraft.rundir.layout import REPORT
from redraft.viewer._cards import Card, judged, needs_rows, other_card, run_card
from redraft.viewer._catalog import Found, found_at, in_flight, inside, listed
from redraft.viewer._filters import PAGE, Filter
from redraft.viewer._index import Clock, Row, TaskIndex
from redraft.viewer._links import Links
from redraft.views import templating

PAGE_FILES = {COMPARISON.name: "comparison.html", "tune": "tune.html", "judge card": "judge-card.html"}
"""The page each kind writes for a person, shown by the viewer as it is."""
SIDE_BY_SIDE = 25
"""Tasks a page of a comparison shows side by side."""


@cache
def environment() -> jinja2.Environment:
    """The report's environment with the viewer's templates in front of its own (same filters and globals)."""
    report = templating.environment()
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader([jinja2.PackageLoader("redraft.viewer", "templates"), report.loader]),  # type: ignore[list-item]
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.filters.update(report.filters)
    env.tests.update(report.tests)
    env.globals.update(report.globals)
    return env


def render(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)


@dataclass
class Site:
    """The root's directories, and the rows of each run read so far (kept, and read again as runs grow)."""

    root: Path
    clock: Clock = time.monotonic
    patience: float | None = None
    """Seconds a page waits for a run's records to be read (None: until they are; see `TaskIndex`)."""
    _indexes: dict[Path, TaskIndex] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def place(self, rel: str, kind: str | None = None) -> Found:
        """The directory ``rel`` under the root, of ``kind`` if given; `UserError` if it lies outside the root or
        is no such directory."""
        path = inside(self.root, rel)
        if path is None:
            raise UserError(f"{rel!r} lies outside the viewer's root")
        found = found_at(self.root.resolve(), path)
        if found is None or (kind is not None and found.kind.name != kind):
            raise UserError(f"{rel!r} is not a {kind or 'run, comparison, tune or judge card'} directory")
        return found

    def index(self, path: Path) -> TaskIndex:
        with self._lock:
            if path not in self._indexes:
                self._indexes[path] = TaskIndex(path, self.clock, self.patience)
            return self._indexes[path]

    def rows(self, found: Found) -> list[Row]:
        return self.index(found.path).fresh()

    def cards(self, human: Callable[[Found], tuple[int, int]] | None = None) -> tuple[list[Card], list[str]]:
        """Every directory's card, newest first; and the directories that would not read (each named). ``human``:
        a run's (passed, labelled) by people's labels (none without it)."""
        cards, unreadable = [], []
        for found in listed(self.root):
            try:
                if found.kind is RUN:
                    rows = self.rows(found) if needs_rows(found) else None
                    cards.append(run_card(found, rows, human(found) if human else (0, 0)))
                else:
                    cards.append(other_card(found))
            except UserError:
                unreadable.append(found.rel)
        return cards, unreadable

    def run_page(self, found: Found, rows: list[Row], f: Filter, links: Links, **review: Any) -> dict[str, Any]:
        """What the run page's template is given (the page itself, or its live part, is rendered from it), from
        ``rows``, the run's rows as read once for the page."""
        human = review.get("human", {})
        shown, kept = f.apply(rows, human) if links.live else (rows[: PAGE * 100], len(rows))
        card = run_card(found, rows if needs_rows(found) else None, review.get("counts", (0, 0)))
        rate = self.index(found.path).rate()
        left = (card.total - card.done) if card.total else None
        return {
            "links": links,
            "title": f"redraft view · {found.rel}",
            "rel": found.rel,
            "card": card,
            "rate": rate,
            "eta": _eta(left / rate) if rate and left and card.state == "running" else None,
            "f": f,
            "rows": shown,
            "kept": kept,
            "page_size": PAGE,
            "stops": sorted({r.stop_reason for r in rows}),
            "errors": sorted({r.error_type for r in rows if r.error_type}),
            "basis": "judged" if judged(found.path) else "graded",
            "report": links.file(found.rel, REPORT) if (found.path / REPORT).is_file() else None,
            "human": human,
            "coverage": review.get("coverage", ""),
            "loading": self.index(found.path).loading,
            "flight": in_flight(found.path) if card.state == "running" and links.live else None,
        }

    def task_context(self, found: Found, task_id: str, links: Links) -> dict[str, Any]:
        """The report's task page's context for ``task_id`` (its record found by `RunReader.find`)."""
        reader = RunReader(found.path)
        entry = reader.find(task_id)
        return task_context(found, entry, reader.trace_of(entry), links)

    def lanes(self, found: Found) -> list[str]:
        """A comparison's lanes (``arms/NAME``..., ``baseline``) that are run directories, arms first."""
        arms = sorted(p for p in (found.path / "arms").glob("*") if (p / "results.jsonl").is_file())
        base = [found.path / "baseline"] if (found.path / "baseline" / "results.jsonl").is_file() else []
        return [p.relative_to(found.path).as_posix() for p in [*arms, *base]]

    def comparison_page(self, found: Found, links: Links, page: int, preference: str = "") -> dict[str, Any]:
        lanes = self.lanes(found)
        by_lane = {lane: {r.task_id: r for r in self.index(found.path / lane).fresh()} for lane in lanes}
        order = list(dict.fromkeys(t for lane in lanes for t in by_lane[lane]))
        start = page * SIDE_BY_SIDE if links.live else 0
        shown = order[start : start + SIDE_BY_SIDE] if links.live else order
        name = PAGE_FILES[COMPARISON.name]
        return {
            "links": links,
            "title": f"redraft view · {found.rel}",
            "rel": found.rel,
            "lanes": lanes,
            "lane_paths": {lane: lane_path(found.rel, lane) for lane in lanes},
            "tasks": [(t, [(lane, by_lane[lane].get(t)) for lane in lanes]) for t in shown],
            "page": page,
            "more": start + SIDE_BY_SIDE < len(order),
            "page_file": links.file(found.rel, name) if (found.path / name).is_file() else None,
            "preference": preference,
        }


def task_context(found: Found, entry: TaskEntry, frames: list[Frame] | None, links: Links) -> dict[str, Any]:
    """The report's task page's context (its history, result, fields; ``frames`` None: lost), with the viewer's
    links."""
    history = build_history(entry.task_id, frames or [])
    return {
        "title": f"redraft · {entry.task_id}",
        "history": history,
        "result": entry.result,
        "trace_lost": "its trace was lost" if frames is None or entry.lost else "",
        "record_extra": {k: v for k, v in entry.extra.items() if v not in (None, "", [], {})},
        "steps": {s.round: s for s in history.best_steps()},
        "back": links.run(found.rel),
        "links": links,
        "rel": found.rel,
    }


def lane_path(rel: str, lane: str) -> str:
    """A comparison's lane's path under the root."""
    return lane if rel in ("", ".") else f"{rel}/{lane}"


def _eta(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
