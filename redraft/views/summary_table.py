"""The run's summary table: one list of rows for the end table of ``redraft run`` and the report's Summary.

Rows are (label, value) pairs of plain text, made from a `Summary` (and whether
the run fed the grade back, from its manifest), so both places show the same
figures in the same words. Money is shown with its basis: what this run paid, and apart from it what
the response cache saved (calls another run had paid for) and what the provider's prompt cache saved
(its discounted reads, less its writes' surcharge: already out of what was paid). The feedback's pass
rates (what the loop optimised) and the held-out grade's (what it achieved) are both shown, and never merged;
an oracle-feedback run says so first, in plain words, and a judged run names its judge (self-judged when it
is the drafter's own model). The terminal table also
breaks stop reasons, errors and usage down by kind in its rows; the report has
a table of its own for each of those, and leaves them out here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from redraft.protocols.messages import Usage
from redraft.rundir.summary import Summary

ORACLE = "ORACLE: the loop was fed the held-out grade; an upper bound, not a result"
SPENT, SAVED, COST = "spent", "saved by the cache", "cost of the calls"
PROVIDER_SAVED = "saved by the provider's cache"
BATCH = "through provider batches (--batch)"


def summary_rows(
    s: Summary, *, breakdowns: bool, oracle: bool = False, judge: str | None = None
) -> list[tuple[str, str]]:
    """The table's rows; ``breakdowns``: include stop reasons, errors and usage per role; ``oracle``: the run
    used oracle feedback; ``judge``: who graded it, when a judge did (`graded_by`)."""
    rows = [("feedback", ORACLE)] if oracle else []
    rows += [("tasks", f"{s.tasks:,}")]
    if judge is not None:
        rows.append(("graded by", judge))
    rows += [
        ("graded pass rate, round 0", _graded(s.initial_graded_pass_rate, s.initial_graded_passed, s)),
        ("graded pass rate, refined", _graded(s.graded_pass_rate, s.graded_passed, s)),
        ("feedback pass rate, round 0", f"{s.initial_pass_rate:.1%} ({s.initial_passed}/{s.tasks})"),
        ("feedback pass rate, refined", f"{s.pass_rate:.1%} ({s.passed}/{s.tasks})"),
        ("fixed / broken (graded)", f"{s.graded_fixed} / {s.graded_broken}" if s.graded else "no grade"),
        ("mean feedback score, round 0 → refined", f"{s.initial_mean_score:.3f} → {s.mean_score:.3f}"),
        ("mean rounds", f"{s.mean_rounds:.2f}"),
    ]
    if breakdowns:
        rows.append(("stop reasons", _counts(s.stop_reasons)))
        if s.errors:
            rows.append(("errors", _counts(s.errors)))
    if s.check_errors:
        rows.append(("check raised", _counts(s.check_errors) + " (tracebacks in results.jsonl and `redraft trace`)"))
    if s.grade_errors:
        rows.append(("grade not made (graded as fail)", _counts(s.grade_errors) + " (why in `redraft trace`)"))
    if s.retried_tasks:
        rows.append(("redone (machinery failed)", f"{s.retried_tasks} task(s): {_counts(s.retries)}"))
    rows.append(("tokens (in / out)", f"{s.usage.input_tokens:,} / {s.usage.output_tokens:,}"))
    rows.append(("model calls", f"{s.usage.calls:,} ({s.usage.cache_hits:,} from the cache)"))
    if breakdowns:
        rows += [(f"  {role}", _role_usage(u)) for role, u in sorted(s.usage_by_role.items())]
    if s.usage.batch_calls:
        rows.append((BATCH, f"{s.usage.batch_calls:,} of {s.usage.calls:,} calls, at batch price"))
    rows += money_rows(s)
    rows.append(("wall time", f"{s.wall_s:.1f} s"))
    if s.stopped_by:
        rows.append(("stopped by", s.stopped_by))
    return rows


def graded_by(config: Mapping[str, Any]) -> str | None:
    """Who graded a run, from its flat config (the manifest's ``config``): its judge and rubric, and whether the
    judge is the drafter's own model (self-judged: allowed, and said); None when the scenario's grade did."""
    judge = config.get("judge")
    if not judge:
        return None
    rubric = Path(config["rubric"]).stem if config.get("rubric") else "the scenario's rubric"
    repeats = int(config.get("judge_repeats") or 1)
    each = f", the mean of {repeats} judgments" if repeats > 1 else ""
    self_judged = "; SELF-JUDGED: the judge is the drafter's own model" if judge == config.get("drafter") else ""
    return f"judge {judge} by {rubric}{each}{self_judged}"


def money_rows(s: Summary) -> list[tuple[str, str]]:
    """USD, each figure with its basis: what this run paid (``spent``); and when the response cache answered calls
    another run had paid for, what they would have cost (``saved by the cache``) and what every call the results
    rest on costs (``cost of the calls``: the same with or without the cache, what a resume keeps equal)."""
    u = s.usage
    unpriced = f" (not priced: {', '.join(s.unpriced_models)})" if s.unpriced_models else ""
    rows = [(SPENT, f"${u.spent_usd:,.4f} paid by this run{unpriced}")]
    if u.saved_calls:  # a new run answered from another's answers: what they would have cost, apart
        rows.append((SAVED, f"${u.saved_usd:,.4f} ({u.saved_calls:,} calls paid by others)"))
        rows.append((COST, f"${u.cost_usd:,.4f}, every call at list price"))
    if u.cached_tokens or u.cache_write_tokens:  # already out of what was spent: the provider billed less
        rows.append((PROVIDER_SAVED, f"${u.prompt_cache_saved_usd:,.4f} ({_prompt_cache(u)}), already out of spent"))
    return rows


def _prompt_cache(u: Usage) -> str:
    written = f", {u.cache_write_tokens:,} written to it" if u.cache_write_tokens else ""
    return f"{u.cached_tokens:,} input tokens read from it{written}"


def _role_usage(u: Usage) -> str:
    saved = f" (${u.saved_usd:,.4f} saved by the cache)" if u.saved_calls else ""
    if u.cached_tokens or u.cache_write_tokens:
        saved += f" (${u.prompt_cache_saved_usd:,.4f} {PROVIDER_SAVED})"
    return f"{u.calls:,} calls, {u.total_tokens:,} tokens, ${u.spent_usd:,.4f}{saved}"


def _graded(rate: float | None, passed: int, s: Summary) -> str:
    if rate is None:
        return "none: nothing was held out from the loop to grade against (a --check run grades with --grade)"
    ungraded = f"; {s.tasks - s.graded} not graded" if s.graded < s.tasks else ""
    return f"{rate:.1%} ({passed}/{s.graded}{ungraded})"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
