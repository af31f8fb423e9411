"""The run's summary table: one list of rows for the end table of ``redraft run`` and the report's Summary.

Rows are (label, value) pairs of plain text, made from a `Summary` alone, so
both places show the same figures in the same words. The terminal table also
breaks stop reasons, errors and usage down by kind in its rows; the report has
a table of its own for each of those, and leaves them out here.
"""

from __future__ import annotations

from redraft.rundir.summary import Summary


def summary_rows(s: Summary, *, breakdowns: bool) -> list[tuple[str, str]]:
    """The table's rows; ``breakdowns``: include stop reasons, errors and usage per role."""
    rows = [
        ("tasks", f"{s.tasks:,}"),
        ("pass rate, round 0", f"{s.initial_pass_rate:.1%} ({s.initial_passed}/{s.tasks})"),
        ("pass rate, refined", f"{s.pass_rate:.1%} ({s.passed}/{s.tasks})"),
        ("fixed / broken by refinement", f"{s.fixed} / {s.broken}"),
        ("mean score, round 0 → refined", f"{s.initial_mean_score:.3f} → {s.mean_score:.3f}"),
        ("mean rounds", f"{s.mean_rounds:.2f}"),
    ]
    if breakdowns:
        rows.append(("stop reasons", _counts(s.stop_reasons)))
        if s.errors:
            rows.append(("errors", _counts(s.errors)))
    rows.append(("tokens (in / out)", f"{s.usage.input_tokens:,} / {s.usage.output_tokens:,}"))
    rows.append(("model calls", f"{s.usage.calls:,} ({s.usage.cache_hits:,} from the cache)"))
    if breakdowns:
        rows += [
            (f"  {role}", f"{u.calls:,} calls, {u.total_tokens:,} tokens, ${u.cost_usd:,.4f}")
            for role, u in sorted(s.usage_by_role.items())
        ]
    unpriced = f" (not priced: {', '.join(s.unpriced_models)})" if s.unpriced_models else ""
    rows.append(("cost", f"${s.usage.cost_usd:,.4f}{unpriced}"))
    rows.append(("wall time", f"{s.wall_s:.1f} s"))
    if s.stopped_by:
        rows.append(("stopped by", s.stopped_by))
    return rows


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
