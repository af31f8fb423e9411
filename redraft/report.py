"""``redraft report``: ``report.html`` (figures, plots, tables) and one page per task under ``report/``.

Scales with the run by streaming: the result records and then the trace are read
one task at a time (`redraft.runreader`), figures are aggregated as they pass
(counts, histograms, bounded top-N heaps), and each task's page is written and
forgotten. ``report.html`` stays small however many tasks there are: it lists
the first `INDEX_ROWS` tasks and links to ``report/index.html``, which lists all.

Everything is self-contained: plots are embedded PNGs, CSS is inline, the only
script is an inline one that marks when every image has loaded (for a headless
browser to check); nothing is fetched from the network.
"""

from __future__ import annotations

import base64
import heapq
import itertools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redraft import report_plots
from redraft.history import build_history
from redraft.report_pages import esc, head, page, score, table, table_head, table_row, task_page, verdict
from redraft.rundir.results import decode_record
from redraft.rundir.summary import summarize
from redraft.runreader import Record, RunReader, safe_name

INDEX_ROWS = 200
TOP_N = 10
BINS = 10
PAGES_DIR = "report"

# Marks <body data-images-loaded="n/m"> once every image has finished loading or failing.
LOADED_SCRIPT = """<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.dataset.imagesLoaded = ok + "/" + imgs.length;
});
</script>
"""


@dataclass
class _Top:
    """The ``n`` largest rows by key, kept in a bounded heap while streaming."""

    n: int
    heap: list[tuple[Any, int, dict[str, Any]]] = field(default_factory=list)
    seq: itertools.count[int] = field(default_factory=itertools.count)

    def push(self, key: Any, row: dict[str, Any]) -> None:
        item = (key, -next(self.seq), row)  # ties: the earlier task wins
        if len(self.heap) < self.n:
            heapq.heappush(self.heap, item)
        elif item > self.heap[0]:
            heapq.heapreplace(self.heap, item)

    def rows(self) -> list[dict[str, Any]]:
        return [row for _, _, row in sorted(self.heap, reverse=True)]


@dataclass
class RunFigures:
    """Everything report.html shows, aggregated in one pass over the run."""

    tasks: int = 0
    before: list[int] = field(default_factory=lambda: [0] * BINS)
    after: list[int] = field(default_factory=lambda: [0] * BINS)
    direct: Counter[int] = field(default_factory=Counter)
    """Round r: tasks decided at r whose best so far passed."""
    final: Counter[int] = field(default_factory=Counter)
    """Length L: tasks decided for L rounds whose final state passed (carried to later rounds)."""
    lengths: Counter[int] = field(default_factory=Counter)
    slowest: _Top = field(default_factory=lambda: _Top(TOP_N))
    costliest: _Top = field(default_factory=lambda: _Top(TOP_N))
    fixed: int = 0
    broken: int = 0

    def add(self, row: dict[str, Any], record: Record, passed_by_round: list[bool]) -> None:
        """Count one task; ``row`` is its `task_row`, kept if it makes a top-N list."""
        self.tasks += 1
        self.before[_bin(record.get("initial_score", 0.0))] += 1
        self.after[_bin(record.get("score", 0.0))] += 1
        for r, passed in enumerate(passed_by_round):
            self.direct[r] += passed
        self.lengths[len(passed_by_round)] += 1
        if passed_by_round and passed_by_round[-1]:
            self.final[len(passed_by_round)] += 1
        self.fixed += bool(record.get("passed")) and not record.get("initial_passed")
        self.broken += bool(record.get("initial_passed")) and not record.get("passed")
        self.slowest.push(row["wall_s"], row)
        self.costliest.push((row["cost_usd"], row["tokens"]), row)

    def pass_curve(self) -> tuple[list[float], list[float]]:
        """Cumulative pass rate and share of tasks still refining, per round."""
        depth = max((n for n in self.lengths if self.lengths[n]), default=0)
        rates, active = [], []
        carried = 0
        for r in range(depth):
            carried += self.final[r]  # tasks that stopped after r rounds keep their final state
            still = sum(v for n, v in self.lengths.items() if n > r)
            rates.append((self.direct[r] + carried) / self.tasks if self.tasks else 0.0)
            active.append(still / self.tasks if self.tasks else 0.0)
        return rates, active


def _bin(value: Any) -> int:
    x = float(value) if isinstance(value, int | float) else 0.0
    return min(BINS - 1, max(0, int(x * BINS)))


def task_row(index: int, record: Record) -> dict[str, Any]:
    usage = record.get("usage") or {}
    return {
        "index": index,
        "task_id": str(record.get("task_id", "")),
        "passed": bool(record.get("passed")),
        "initial_score": record.get("initial_score", 0.0),
        "score": record.get("score", 0.0),
        "rounds": record.get("rounds", 0),
        "stop_reason": record.get("stop_reason", ""),
        "wall_s": float(record.get("wall_s", 0.0)),
        "cost_usd": float(usage.get("cost_usd", 0.0)),
        "tokens": int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0)),
    }


def write_report(root: Path, *, max_pages: int | None = None) -> Path:
    """Write ``root/report.html`` and the task pages; return the report's path.

    ``max_pages`` caps the per-task pages (the first N tasks); None writes one per task.
    """
    reader = RunReader(root)
    manifest = reader.manifest()
    threshold = float((manifest.get("config") or {}).get("threshold", 1.0))
    pages = root / PAGES_DIR
    pages.mkdir(exist_ok=True)
    for stale in pages.glob("*.html"):  # pages of an earlier report, perhaps of tasks since cut off
        stale.unlink()
    figures = RunFigures()
    preview: list[dict[str, Any]] = []
    with open(pages / "index.html", "w", encoding="utf-8") as index:
        index.write(_index_head(manifest))
        for i, (entry, frames) in enumerate(reader.tasks()):
            history = build_history(entry.task_id, frames)
            row = task_row(i, entry.record)
            figures.add(row, entry.record, history.passed_by_round(threshold))
            linked = max_pages is None or i < max_pages
            if linked:
                name = safe_name(entry.task_id) + ".html"
                (pages / name).write_text(task_page(history, entry.record), encoding="utf-8")
            index.write(table_row(_task_cells(row, _link(row, linked, prefix="")), TASK_NUMERIC) + "\n")
            if len(preview) < INDEX_ROWS:
                preview.append(row)
        index.write("</tbody></table></body></html>\n")
    summary = _summary_of(reader, manifest)
    out = root / "report.html"
    body = _report_body(root, manifest, summary, figures, preview, max_pages)
    out.write_text(page(f"redraft report · {root.name}", body, script=LOADED_SCRIPT), encoding="utf-8")
    return out


def _summary_of(reader: RunReader, manifest: dict[str, Any]) -> dict[str, Any]:
    """The run's figures, by the function `redraft run` uses, over the records as they are now.

    Not read from summary.json, which a run still going (or killed, or resumed)
    has not yet brought up to date; only the wall time and a run budget's stop,
    which the records do not hold, come from there.
    """
    import msgspec

    saved = reader.summary()
    wall_s = float(saved.get("wall_s", manifest.get("wall_s", 0.0)))
    built: dict[str, Any] = msgspec.to_builtins(
        summarize((decode_record(e.record) for e in reader.entries()), wall_s=wall_s)
    )
    built["stopped_by"] = saved.get("stopped_by")
    return built


def _link(row: dict[str, Any], linked: bool, prefix: str = f"{PAGES_DIR}/") -> str:
    """The task id, linked to its page if one was written."""
    if not linked:
        return esc(row["task_id"])
    return f'<a href="{esc(prefix + safe_name(row["task_id"]))}.html">{esc(row["task_id"])}</a>'


def _task_cells(row: dict[str, Any], link: str) -> list[str]:
    return [
        link,
        verdict(row["passed"]),
        f"{score(row['initial_score'])} → {score(row['score'])}",
        esc(row["rounds"]),
        esc(row["stop_reason"]),
        f"{row['tokens']:,}",
        f"${row['cost_usd']:.4f}",
        f"{row['wall_s']:.2f}",
    ]


TASK_HEADER = ["task", "result", "score", "rounds", "stop reason", "tokens", "cost", "wall s"]
TASK_NUMERIC = [3, 5, 6, 7]


def _index_head(manifest: dict[str, Any]) -> str:
    return (
        f'{head("redraft · all tasks")}<nav><a href="../report.html">← run report</a></nav>'
        f"<h1>All tasks of {esc(manifest.get('run_id', ''))}</h1>{table_head(TASK_HEADER, TASK_NUMERIC)}\n"
    )


def _linked(row: dict[str, Any], max_pages: int | None) -> bool:
    return max_pages is None or row["index"] < max_pages


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode()
    return f'<figure><img src="data:image/png;base64,{data}" alt="{esc(alt)}"></figure>'


def _report_body(
    root: Path,
    manifest: dict[str, Any],
    s: dict[str, Any],
    figures: RunFigures,
    preview: list[dict[str, Any]],
    max_pages: int | None,
) -> str:
    config = manifest.get("config") or {}
    usage = s.get("usage") or {}
    tasks = int(s.get("tasks", 0))
    parts = [
        f"<h1>redraft run {esc(manifest.get('run_id', root.name))}</h1>",
        '<p class="muted">'
        + esc(
            f"scenario {config.get('scenario', '?')} · strategy {config.get('strategy', '?')} · "
            f"K={config.get('samples', '?')} · max rounds {config.get('max_rounds', '?')} · "
            f"drafter {config.get('drafter', '?')} · critic {config.get('critic', '?')} · "
            f"started {manifest.get('started_at', '?')}"
        )
        + "</p>",
    ]
    rows = [
        ["tasks", f"{tasks:,}"],
        ["pass rate, round 0", f"{s.get('initial_pass_rate', 0.0):.1%} ({s.get('initial_passed', 0)}/{tasks})"],
        ["pass rate, refined", f"{s.get('pass_rate', 0.0):.1%} ({s.get('passed', 0)}/{tasks})"],
        ["fixed / broken by refinement", f"{figures.fixed} / {figures.broken}"],
        ["mean score, round 0 → refined", f"{s.get('initial_mean_score', 0.0):.3f} → {s.get('mean_score', 0.0):.3f}"],
        ["mean rounds", f"{s.get('mean_rounds', 0.0):.2f}"],
        ["tokens (in / out)", f"{usage.get('input_tokens', 0):,} / {usage.get('output_tokens', 0):,}"],
        ["model calls", f"{usage.get('calls', 0):,} ({usage.get('cache_hits', 0):,} from the cache)"],
        ["cost", esc(f"${usage.get('cost_usd', 0.0):,.4f}" + _unpriced(s))],
        ["wall time", f"{s.get('wall_s', 0.0):.1f} s"],
    ]
    if s.get("stopped_by"):
        rows.append(["stopped by", esc(s["stopped_by"])])
    parts.append(
        '<h2>Summary</h2><table class="kv">'
        + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
        + "</table>"
    )
    parts.append(_plots(s, figures))
    parts.append(_tables(s, figures, max_pages))
    parts.append(f"<h2>Tasks</h2>{_preview_note(len(preview), tasks, max_pages)}")
    parts.append(
        table(TASK_HEADER, (_task_cells(r, _link(r, _linked(r, max_pages))) for r in preview), numeric=TASK_NUMERIC)
    )
    return "\n".join(parts)


def _unpriced(s: dict[str, Any]) -> str:
    models = s.get("unpriced_models") or []
    return f" (not priced: {', '.join(models)})" if models else ""


def _preview_note(shown: int, tasks: int, max_pages: int | None) -> str:
    note = f'<p class="muted">{shown:,} of {tasks:,} tasks shown; <a href="{PAGES_DIR}/index.html">all tasks</a>.'
    if max_pages is not None and max_pages < tasks:
        note += f" Pages were written for the first {max_pages:,} tasks only (--max-pages)."
    return note + " Each task's page shows its rounds: candidates, checks, critiques, decisions and diffs.</p>"


def _plots(s: dict[str, Any], figures: RunFigures) -> str:
    images = []
    rates, active = figures.pass_curve()
    if rates:
        images.append(_img(report_plots.pass_rate_by_round(rates, active), "pass rate per round"))
    edges = [i / BINS for i in range(BINS + 1)]
    images.append(_img(report_plots.score_distribution(edges, figures.before, figures.after), "score distribution"))
    if s.get("stop_reasons"):
        images.append(_img(report_plots.horizontal_bars(s["stop_reasons"], "Stop reasons", "tasks"), "stop reasons"))
    roles = {
        r: (int(u.get("input_tokens", 0)), int(u.get("output_tokens", 0)))
        for r, u in (s.get("usage_by_role") or {}).items()
    }
    if roles:
        images.append(_img(report_plots.tokens_by_role(roles), "tokens per role"))
    return '<h2>Plots</h2><div class="grid">' + "".join(images) + "</div>"


def _tables(s: dict[str, Any], figures: RunFigures, max_pages: int | None) -> str:
    tasks = max(int(s.get("tasks", 0)), 1)
    reasons = sorted((s.get("stop_reasons") or {}).items(), key=lambda kv: -kv[1])
    parts = [
        "<h2>Stop reasons</h2>",
        table(
            ["reason", "tasks", "share"], ([esc(k), f"{v:,}", f"{v / tasks:.1%}"] for k, v in reasons), numeric=[1, 2]
        ),
    ]
    by_role = sorted((s.get("usage_by_role") or {}).items())
    parts.append("<h2>Tokens and cost per role</h2>")
    parts.append(
        table(
            ["role", "calls", "input tokens", "output tokens", "cached tokens", "cache hits", "cost"],
            (
                [
                    esc(role),
                    f"{u.get('calls', 0):,}",
                    f"{u.get('input_tokens', 0):,}",
                    f"{u.get('output_tokens', 0):,}",
                    f"{u.get('cached_tokens', 0):,}",
                    f"{u.get('cache_hits', 0):,}",
                    f"${u.get('cost_usd', 0.0):,.4f}",
                ]
                for role, u in by_role
            ),
            numeric=[1, 2, 3, 4, 5, 6],
        )
    )
    errors = sorted((s.get("errors") or {}).items(), key=lambda kv: -kv[1])
    parts.append("<h2>Errors by cause</h2>")
    parts.append(
        table(["cause", "tasks"], ([esc(k), f"{v:,}"] for k, v in errors), numeric=[1])
        if errors
        else '<p class="muted">No task stopped with an error.</p>'
    )
    for title, top in (("Slowest tasks", figures.slowest), ("Most expensive tasks", figures.costliest)):
        parts.append(f"<h2>{title}</h2>")
        parts.append(
            table(
                TASK_HEADER, (_task_cells(r, _link(r, _linked(r, max_pages))) for r in top.rows()), numeric=TASK_NUMERIC
            )
        )
    return "\n".join(parts)
