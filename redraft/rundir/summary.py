"""A run's totals (``summary.json``, the end table), computed by streaming its results.

`summarize` keeps a few counters (a `Tally`), never the results: its memory does
not grow with the run. The writer calls it when a run ends; the report keeps a
tally of the records as it streams them, so a run still going shows what has
finished.

"Fixed" and "broken" have one definition everywhere they are shown (the end table,
the report, a comparison): `refinement_change`, from round 0's best answer to the
final one, on the feedback or on the held-out grade.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import msgspec

from redraft.protocols.messages import Result, Usage

Change = Literal["fixed", "broken"]


def refinement_change(initial: bool | None, final: bool | None) -> Change | None:
    """What refinement did to a task, by the answers alone: ``fixed`` when round 0's best answer failed and the
    final answer passes, ``broken`` the reverse; None when both agree or either is unknown (not graded). A
    revision that passed but was not kept changed nothing: only the final answer counts."""
    if initial is None or final is None or initial == final:
        return None
    return "fixed" if final else "broken"


class Summary(msgspec.Struct, kw_only=True):
    """The end table's figures (``summary.json``)."""

    tasks: int = 0
    passed: int = 0
    pass_rate: float = 0.0
    initial_passed: int = 0
    initial_pass_rate: float = 0.0
    mean_score: float = 0.0
    initial_mean_score: float = 0.0
    mean_rounds: float = 0.0
    stop_reasons: dict[str, int] = {}
    errors: dict[str, int] = {}
    """Tasks that stopped with ``error``, counted by cause (the exception type)."""
    usage: Usage = Usage()
    task_wall_s: float = 0.0
    """Sum of the tasks' own wall times (they overlap)."""
    wall_s: float = 0.0
    """Wall time of the driver invocation(s) that wrote the results."""
    usage_by_role: dict[str, Usage] = {}
    unpriced_models: list[str] = []
    """Models without a price: their calls are in the token totals but cost 0 USD here."""
    stopped_by: str | None = None
    """Why dispatch stopped before every task ran (a run budget), or None."""
    fixed: int = 0
    """Tasks whose round-0 leader failed the feedback and whose final answer passed it (`refinement_change`)."""
    broken: int = 0
    """Tasks whose round-0 leader passed the feedback and whose final answer failed it."""
    graded: int = 0
    """Tasks with a held-out grade (the others have nothing to be graded against: left out of graded rates)."""
    graded_passed: int = 0
    """Tasks whose final answer passed the held-out grade."""
    graded_pass_rate: float | None = None
    """``graded_passed / graded``; None when no task was graded."""
    initial_graded_passed: int = 0
    initial_graded_pass_rate: float | None = None
    """Round 0's leaders, graded: what refinement started from."""
    graded_fixed: int = 0
    """Graded tasks whose round-0 leader failed the grade and whose final answer passed it (`refinement_change`;
    a task whose round-0 leader has no grade is neither fixed nor broken)."""
    graded_broken: int = 0
    retried_tasks: int = 0
    """Tasks the driver sent out more than once because the machinery failed under them."""
    retries: dict[str, int] = {}
    """Those failed attempts, counted by cause (``ActorDiedError``, ``CallTimeoutError``...)."""
    check_errors: dict[str, int] = {}
    """Tasks a check's failure ended, counted by what it raised and where (``KeyError at check.py:5 in f``)."""
    grade_errors: dict[str, int] = {}
    """Tasks whose held-out grade could not be made, graded as failed (in ``graded``), counted by cause
    (``Result.grade_error``: ``ProtocolError``, ``hung``...)."""


def summarize(results: Iterable[Result], *, wall_s: float) -> Summary:
    """Totals over results, streamed (memory does not grow with the run).

    Results come from `redraft.rundir._results.latest_results`, which has given every
    error its ``error_type`` (old records included).
    """
    tally = Tally()
    for result in results:
        tally.add(result)
    return tally.summary(wall_s=wall_s)


@dataclass
class Tally:
    """The running totals `summarize` keeps, for a reader that streams the results for other ends too."""

    tasks: int = 0
    passed: int = 0
    initial_passed: int = 0
    fixed: int = 0
    broken: int = 0
    score: float = 0.0
    initial_score: float = 0.0
    rounds: int = 0
    task_wall_s: float = 0.0
    reasons: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    usage: Usage = field(default_factory=Usage)
    by_role: dict[str, Usage] = field(default_factory=dict)
    unpriced: set[str] = field(default_factory=set)
    graded: int = 0
    graded_passed: int = 0
    initial_graded_passed: int = 0
    graded_fixed: int = 0
    graded_broken: int = 0
    retried_tasks: int = 0
    retries: Counter[str] = field(default_factory=Counter)
    check_errors: Counter[str] = field(default_factory=Counter)
    grade_errors: Counter[str] = field(default_factory=Counter)

    def add(self, r: Result) -> None:
        self.tasks += 1
        self.retried_tasks += r.attempts > 1
        self.retries.update(r.retried_for)
        self.passed += r.passed
        self.initial_passed += r.initial_passed
        self._changed(refinement_change(r.initial_passed, r.passed), graded=False)
        self.score += r.score
        self.initial_score += r.initial_score
        self.rounds += r.rounds
        self.task_wall_s += r.wall_s
        self.reasons[r.stop_reason] += 1
        if r.error:
            self.errors[r.error_type or "unknown"] += 1
        if r.error_type == "CheckError":
            where = f" at {r.error_where}" if r.error_where else ""
            self.check_errors[f"{r.error_raised or 'an exception'}{where}"] += 1
        self.usage = self.usage + r.usage
        for role, role_usage in r.usage_by_role.items():
            self.by_role[role] = self.by_role.get(role, Usage()) + role_usage
        self.unpriced.update(r.unpriced_models)
        if r.grade_error is not None:
            self.grade_errors[r.grade_error] += 1
        if r.graded_pass is not None:
            initial = bool(r.initial_graded_pass)
            self.graded += 1
            self.graded_passed += r.graded_pass
            self.initial_graded_passed += initial
            self._changed(refinement_change(r.initial_graded_pass, r.graded_pass), graded=True)

    def _changed(self, change: Change | None, *, graded: bool) -> None:
        if graded:
            self.graded_fixed += change == "fixed"
            self.graded_broken += change == "broken"
        else:
            self.fixed += change == "fixed"
            self.broken += change == "broken"

    def summary(self, *, wall_s: float) -> Summary:
        n = self.tasks or 1  # no task: every rate and mean is 0
        return Summary(
            tasks=self.tasks,
            passed=self.passed,
            pass_rate=self.passed / n,
            initial_passed=self.initial_passed,
            initial_pass_rate=self.initial_passed / n,
            mean_score=self.score / n,
            initial_mean_score=self.initial_score / n,
            mean_rounds=self.rounds / n,
            stop_reasons=dict(self.reasons),
            errors=dict(self.errors),
            usage=self.usage,
            task_wall_s=self.task_wall_s,
            wall_s=wall_s,
            usage_by_role=dict(self.by_role),
            unpriced_models=sorted(self.unpriced),
            fixed=self.fixed,
            broken=self.broken,
            graded=self.graded,
            graded_passed=self.graded_passed,
            graded_pass_rate=self.graded_passed / self.graded if self.graded else None,
            initial_graded_passed=self.initial_graded_passed,
            initial_graded_pass_rate=self.initial_graded_passed / self.graded if self.graded else None,
            graded_fixed=self.graded_fixed,
            graded_broken=self.graded_broken,
            retried_tasks=self.retried_tasks,
            retries=dict(self.retries),
            check_errors=dict(self.check_errors),
            grade_errors=dict(self.grade_errors),
        )
