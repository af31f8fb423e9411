"""The task list's filters, read from a page's query string and written back into its links, so a filtered
view is a URL that can be shared. Filters are applied on the server, over the run's rows
(`redraft.viewer._index.Row`); an unknown value is an error that lists the known ones, never ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Literal
from urllib.parse import urlencode

from redraft.errors import UserError
from redraft.viewer._index import Row

Verdict = Literal["pass", "fail", "none"]
VERDICTS = ("pass", "fail", "none")
CHANGES = ("fixed", "broken")
PAGE = 100
"""Rows a page of the task list shows."""


@dataclass(frozen=True)
class Filter:
    """What a task list shows: every field empty shows every task."""

    stop: str = ""
    """A stop reason."""
    feedback: str = ""
    """``pass`` / ``fail``: the loop's verdict."""
    graded: str = ""
    """``pass`` / ``fail`` / ``none``: the held-out (or judged) grade; ``none``, not graded."""
    human: str = ""
    """``pass`` / ``fail`` / ``none``: a person's latest label; ``none``, unlabelled."""
    change: str = ""
    """``fixed`` / ``broken`` by refinement."""
    error: str = ""
    """An error's cause (``CheckError``...); ``any`` for every task that stopped with an error."""
    rounds_min: int | None = None
    rounds_max: int | None = None
    cost_min: float | None = None
    cost_max: float | None = None
    q: str = ""
    """Words every shown task's final answer holds (case ignored)."""
    page: int = 0

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> Filter:
        """From a query string; `UserError` naming the known values for an unknown one."""
        for name, known in (("feedback", VERDICTS[:2]), ("graded", VERDICTS), ("human", VERDICTS), ("change", CHANGES)):
            value = query.get(name, "")
            if value and value not in known:
                raise UserError(f"{name}={value!r} is not one of {', '.join(known)}")
        return cls(
            stop=query.get("stop", ""),
            feedback=query.get("feedback", ""),
            graded=query.get("graded", ""),
            human=query.get("human", ""),
            change=query.get("change", ""),
            error=query.get("error", ""),
            rounds_min=_whole(query, "rounds_min"),
            rounds_max=_whole(query, "rounds_max"),
            cost_min=_number(query, "cost_min"),
            cost_max=_number(query, "cost_max"),
            q=query.get("q", "").strip(),
            page=max(0, _whole(query, "page") or 0),
        )

    def query(self, **changed: object) -> str:
        """This filter as a query string (``changed`` fields replaced; a filter change goes back to page 0)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)} | {"page": 0} | changed
        return urlencode({k: v for k, v in values.items() if v not in ("", None, 0) or (k != "page" and v == 0)})

    def active(self) -> bool:
        return any(getattr(self, f.name) not in ("", None) for f in fields(self) if f.name != "page")

    def keeps(self, row: Row, human: Mapping[str, bool]) -> bool:
        """Whether ``row`` is shown; ``human``: the tasks' latest labels (pass True)."""
        if self.stop and row.stop_reason != self.stop:
            return False
        if self.feedback and row.passed != (self.feedback == "pass"):
            return False
        if self.graded and _verdict(row.graded_pass) != self.graded:
            return False
        if self.human and _verdict(human.get(row.task_id)) != self.human:
            return False
        if self.change and row.change != self.change:
            return False
        if self.error and (row.error_type is None or self.error not in ("any", row.error_type)):
            return False
        if not self._in_ranges(row):
            return False
        words = self.q.lower().split()
        return not words or all(word in row.text.lower() for word in words)

    def _in_ranges(self, row: Row) -> bool:
        return (
            (self.rounds_min is None or row.rounds >= self.rounds_min)
            and (self.rounds_max is None or row.rounds <= self.rounds_max)
            and (self.cost_min is None or row.cost_usd >= self.cost_min)
            and (self.cost_max is None or row.cost_usd <= self.cost_max)
        )

    def apply(self, rows: Iterable[Row], human: Mapping[str, bool]) -> tuple[list[Row], int]:
        """The page of rows this filter shows, and how many rows it keeps in all."""
        kept = [row for row in rows if self.keeps(row, human)] if self.active() else list(rows)
        start = self.page * PAGE
        return kept[start : start + PAGE], len(kept)


def _verdict(passed: bool | None) -> str:
    return "none" if passed is None else "pass" if passed else "fail"


def _number(query: Mapping[str, str], name: str) -> float | None:
    value = query.get(name, "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise UserError(f"{name}={value!r} is not a number") from None


def _whole(query: Mapping[str, str], name: str) -> int | None:
    number = _number(query, name)
    if number is not None and number != int(number):
        raise UserError(f"{name}={query[name]!r} is not a whole number")
    return None if number is None else int(number)
