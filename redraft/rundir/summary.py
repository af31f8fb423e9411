"""A run's totals (``summary.json``, the end table), computed by streaming its results.

`summarize` keeps a few counters, never the results: its memory does not grow
with the run. The writer calls it when a run ends; the report calls it again over
the records as they are, so a run still going shows what has finished.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import msgspec

from redraft.protocols.messages import Result, Usage


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
    """Tasks whose round-0 leader failed and whose best candidate passed: fixed by refinement."""
    broken: int = 0
    """Tasks whose round-0 leader passed and whose best candidate failed."""


def summarize(results: Iterable[Result], *, wall_s: float) -> Summary:
    """Totals over results, streamed (memory does not grow with the run).

    Results come from `redraft.rundir.results.read_results`, which has given every
    error its ``error_type`` (old records included).
    """
    s = Summary(wall_s=wall_s)
    score = initial_score = rounds = 0.0
    reasons: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    usage = Usage()
    by_role: dict[str, Usage] = {}
    unpriced: set[str] = set()
    for r in results:
        s.tasks += 1
        s.passed += r.passed
        s.initial_passed += r.initial_passed
        s.fixed += r.passed and not r.initial_passed
        s.broken += r.initial_passed and not r.passed
        score += r.score
        initial_score += r.initial_score
        rounds += r.rounds
        reasons[r.stop_reason] += 1
        if r.error:
            errors[r.error_type or "unknown"] += 1
        usage = usage + r.usage
        for role, role_usage in r.usage_by_role.items():
            by_role[role] = by_role.get(role, Usage()) + role_usage
        unpriced.update(r.unpriced_models)
        s.task_wall_s += r.wall_s
    if s.tasks:
        s.pass_rate = s.passed / s.tasks
        s.initial_pass_rate = s.initial_passed / s.tasks
        s.mean_score, s.initial_mean_score = score / s.tasks, initial_score / s.tasks
        s.mean_rounds = rounds / s.tasks
    s.stop_reasons, s.errors, s.usage = dict(reasons), dict(errors), usage
    s.usage_by_role, s.unpriced_models = by_role, sorted(unpriced)
    return s
