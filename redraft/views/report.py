"""``redraft report``: ``report.html`` (figures, plots, tables) and one page per task under ``report/``.

Scales with the run by streaming: the run is read one task at a time
(`redraft.rundir.RunReader`), figures are aggregated as they pass (counts,
histograms, bounded top-N heaps), each task's page is written and forgotten,
and ``report/index.html`` is rendered row by row as the tasks pass. Its cost is
bounded however long the run: every result is counted, but pages are written for
the first `MAX_PAGES` tasks (``--max-pages``; any other on demand, ``--task``), the
index lists the first `MAX_INDEX`, and the figures read from the trace (pass rate
per round, how calls were spent) come from at most `TRACED` tasks spread evenly over
the run, which the page says. ``report.html`` lists the first `INDEX_ROWS` tasks.

Pages are rendered by Jinja2 templates with autoescaping (`redraft.views.templating`):
model text cannot open a tag. Everything is self-contained: plots are embedded
PNGs, CSS is inline, the only script is an inline one that marks when every image
has loaded (for a headless browser to check); nothing is fetched from the network.
"""

from __future__ import annotations

import errno
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from redraft.errors import RunDirWriteError
from redraft.protocols.messages import Result, Usage
from redraft.rundir import RunReader, Summary, TaskHistory, build_history, check_run, safe_name
from redraft.rundir.layout import PAGES_DIR, REPORT
from redraft.rundir.spending import Spent, spending
from redraft.rundir.summary import Tally
from redraft.views import plots
from redraft.views._fields import TRACE_LOST, is_empty
from redraft.views._figures import RoundCurve, Top
from redraft.views._spending import PARTS_HEADER, TABLE_HEADER, SpendingView, spending_view
from redraft.views.summary_table import graded_by, summary_rows
from redraft.views.templating import render, template

if TYPE_CHECKING:  # matplotlib is the report extra's: loaded where a plot is drawn
    from matplotlib.figure import Figure

INDEX_ROWS = 200
MAX_PAGES = 1_000
"""Task pages written by default: a run's first tasks."""
MAX_INDEX = 10_000
"""Tasks report/index.html lists (a row each)."""
TRACED = 20_000
"""Tasks whose traces are read for the figures only a trace holds; a longer run's are every k-th task's."""
TOP_N = 10
BINS = 10


@dataclass(slots=True)
class TaskRow:
    """One task as the task tables show it (not frozen: a report makes one per task, and frozen ones cost more)."""

    index: int
    task_id: str
    passed: bool
    """Its final answer's feedback verdict: what the loop saw."""
    graded_pass: bool | None
    """Its final answer's held-out grade (None: nothing to grade it against)."""
    initial_score: float
    score: float
    rounds: int
    stop_reason: str
    wall_s: float
    cost_usd: float
    tokens: int
    page: str | None
    """Its page's file name under ``report/``, or None if none was written (--max-pages)."""


def task_row(index: int, result: Result, *, linked: bool = True) -> TaskRow:
    return TaskRow(
        index=index,
        task_id=result.task_id,
        passed=result.passed,
        graded_pass=result.graded_pass,
        initial_score=result.initial_score,
        score=result.score,
        rounds=result.rounds,
        stop_reason=result.stop_reason,
        wall_s=result.wall_s,
        cost_usd=result.usage.cost_usd,
        tokens=result.usage.total_tokens,
        page=safe_name(result.task_id) + ".html" if linked else None,
    )


@dataclass
class RunFigures:
    """Everything report.html shows beyond the summary, aggregated in one pass over the run."""

    tasks: int = 0
    before: list[int] = field(default_factory=lambda: [0] * BINS)
    after: list[int] = field(default_factory=lambda: [0] * BINS)
    feedback: RoundCurve = field(default_factory=RoundCurve)
    """Every task, by the loop's own feedback."""
    graded: RoundCurve = field(default_factory=RoundCurve)
    """The tasks with a held-out grade, by it."""
    slowest: Top[TaskRow] = field(default_factory=lambda: Top[TaskRow](TOP_N))
    costliest: Top[TaskRow] = field(default_factory=lambda: Top[TaskRow](TOP_N))
    preview: list[TaskRow] = field(default_factory=list)
    """The first `INDEX_ROWS` tasks."""
    totals: Tally = field(default_factory=Tally)
    """The summary's figures, by the function `redraft run` uses (`redraft.rundir.summary`)."""
    spent: list[list[Spent]] = field(default_factory=list)
    """Each traced task's calls its strategy chose (`redraft.rundir.spending`), in the order they finished."""
    traced: int = 0
    """Tasks whose traces were read (every task, up to `TRACED`; then every k-th)."""

    def add(self, row: TaskRow, result: Result) -> None:
        """Count one task; its row is kept if it makes a top-N list or the preview."""
        self.tasks += 1
        self.totals.add(result)
        if len(self.preview) < INDEX_ROWS:
            self.preview.append(row)
        self.before[_bin(row.initial_score)] += 1
        self.after[_bin(row.score)] += 1
        self.slowest.push(row.wall_s, row)
        self.costliest.push((row.cost_usd, row.tokens), row)

    def add_trace(self, result: Result, passed_by_round: list[bool], graded_by_round: list[bool | None]) -> None:
        """Count one traced task's rounds. ``graded_by_round`` counts only if the task was graded; a round whose
        best has no grade counts as failed."""
        self.traced += 1
        self.feedback.add(passed_by_round)
        if result.graded_pass is not None:
            self.graded.add([state is True for state in graded_by_round])

    def pass_curves(self) -> tuple[list[float], list[float] | None, list[float]]:
        """Per round: the feedback's pass rate, the graded one (None: no task was graded), tasks still refining."""
        depth = self.feedback.depth()
        graded = self.graded.rates(depth) if self.graded.tasks else None
        return self.feedback.rates(depth), graded, self.feedback.still_refining(depth)


def _bin(x: float) -> int:
    return min(BINS - 1, max(0, int(x * BINS)))


@dataclass(frozen=True)
class Report:
    """A written report: its path, and how the run's calls were spent (None: its strategy chose none)."""

    path: Path
    spending: SpendingView | None


def write_report(root: Path, *, max_pages: int | None = MAX_PAGES) -> Path:
    """Write ``root/report.html`` and the task pages; return the report's path.

    ``max_pages`` caps the per-task pages (the first N tasks); None writes one per task.
    """
    return report(root, max_pages=max_pages).path


def report(root: Path, *, max_pages: int | None = MAX_PAGES) -> Report:
    """`write_report`, also returning what the one pass over the run found of how its calls were spent.

    Written only into a run's directory (`UserError` otherwise); one that takes no writes (read-only, full) is
    said in one `RunDirWriteError` line, with where to write it instead."""
    check_run(root)
    try:
        return _written(root, max_pages)
    except OSError as exc:
        if exc.errno not in UNWRITABLE:
            raise
        raise RunDirWriteError(
            f"cannot write the report in {root} ({exc.strerror or exc}): the run directory takes no writes; copy it "
            f"somewhere writable (cp -r {root} COPY) and run `redraft report COPY`"
        ) from None


UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT})
"""What a directory that takes no writes answers: read-only, not ours to write, full."""


def _written(root: Path, max_pages: int | None) -> Report:
    reader = RunReader(root)
    manifest = reader.manifest()
    pages = root / PAGES_DIR
    pages.mkdir(exist_ok=True)
    for stale in pages.glob("*.html"):  # pages of an earlier report, perhaps of tasks since cut off
        stale.unlink()
    figures = RunFigures()
    threshold = float((manifest.get("config") or {}).get("threshold", 1.0))
    rows = _stream_tasks(reader, pages, figures, threshold, max_pages)
    index = template("index.html.j2")
    listed = itertools.islice(rows, MAX_INDEX)
    index.stream(title="redraft · all tasks", run_id=manifest.get("run_id", ""), rows=listed, listed=MAX_INDEX).dump(
        str(pages / "index.html"), encoding="utf-8"
    )
    for _ in rows:  # the tasks past the index's rows are counted all the same
        pass
    out = root / REPORT
    spent = spending_view(figures.spent)
    out.write_text(_report_page(root, reader, figures, spent, max_pages), encoding="utf-8")
    return Report(out, spent)


def _stream_tasks(
    reader: RunReader, pages: Path, figures: RunFigures, threshold: float, max_pages: int | None
) -> Iterator[TaskRow]:
    """Each task's row, in order, after writing its page and counting it (one task in memory at a time)."""
    every = max(1, -(-reader.count() // TRACED))  # the trace of every k-th task, at most TRACED of them
    paged = (lambda i: True) if max_pages is None else (lambda i: i < max_pages)
    for i, (entry, frames) in enumerate(reader.sampled(lambda i: i % every == 0 or paged(i))):
        row = task_row(i, entry.result, linked=max_pages is None or i < max_pages)
        figures.add(row, entry.result)
        if frames is None:
            yield row
            continue
        history = build_history(entry.task_id, frames)
        if i % every == 0:
            figures.add_trace(entry.result, history.passed_by_round(threshold), history.graded_by_round())
            figures.spent.append(spending(entry.task_id, frames))
        if row.page is not None:
            page = task_page(history, entry.result, record_extra=entry.extra, trace_lost=entry.lost)
            (pages / row.page).write_bytes(page.encode())  # bytes: no text layer per file
        yield row


def write_task_page(root: Path, task_id: str) -> Path:
    """Write one task's page under ``root/report/`` (a task a capped report left without one); return its path.
    `UserError` naming some known ids if the run has no such task."""
    reader = RunReader(root)
    entry = reader.find(task_id)
    frames = reader.frames(entry)
    page = task_page(build_history(task_id, frames), entry.result, record_extra=entry.extra, trace_lost=entry.lost)
    out = root / PAGES_DIR / (safe_name(task_id) + ".html")
    out.parent.mkdir(exist_ok=True)
    out.write_bytes(page.encode())
    return out


def task_page(
    history: TaskHistory,
    result: Result,
    *,
    record_extra: dict[str, Any] | None = None,
    back: str = f"../{REPORT}",
    trace_lost: bool = False,
) -> str:
    """The page of one task: its result, prompt, then every round and the best candidate's diffs (or, when its
    frames were lost, its result and that it lost them)."""
    return render(
        "task.html.j2",
        title=f"redraft · {history.task_id}",
        history=history,
        result=result,
        trace_lost=TRACE_LOST if trace_lost else "",
        record_extra={k: v for k, v in (record_extra or {}).items() if not is_empty(v)},
        steps={s.round: s for s in history.best_steps()},
        back=back,
    )


def run_summary(reader: RunReader, totals: Tally) -> Summary:
    """The run's figures from the records as they are now (``totals``), not read from summary.json.

    summary.json is not yet up to date in a run still going (or killed, or
    resumed); only the wall time and a run budget's stop, which the records do
    not hold, come from there.
    """
    saved = reader.saved_summary()
    wall_s = saved.wall_s if saved is not None else float(reader.manifest().get("wall_s", 0.0))
    summary = totals.summary(wall_s=wall_s)
    summary.stopped_by = saved.stopped_by if saved is not None else None
    return summary


def _report_page(
    root: Path, reader: RunReader, figures: RunFigures, spent: SpendingView | None, max_pages: int | None
) -> str:
    manifest = reader.manifest()
    s = run_summary(reader, figures.totals)
    return render(
        "report.html.j2",
        title=f"redraft report · {root.name}",
        run_id=manifest.get("run_id", root.name),
        run_line=_run_line(manifest),
        summary_rows=summary_rows(
            s,
            breakdowns=False,
            oracle=bool((manifest.get("config") or {}).get("oracle_feedback")),
            judge=graded_by(manifest.get("config") or {}),
        ),
        plots=[(plots.png(fig), alt) for fig, alt in plot_figures(s, figures, spent)],
        spending=spent,
        spending_header=TABLE_HEADER,
        parts_header=PARTS_HEADER,
        **_breakdowns(s),
        slowest=figures.slowest.rows(),
        costliest=figures.costliest.rows(),
        preview=figures.preview,
        tasks=s.tasks,
        traced=figures.traced,
        max_pages=max_pages,
        pages_dir=PAGES_DIR,
    )


def _breakdowns(s: Summary) -> dict[str, list[tuple[str, ...]]]:
    """The rows of the stop reasons, tokens per role and errors tables (plain text cells)."""
    tasks = max(s.tasks, 1)
    by_count = sorted(s.stop_reasons.items(), key=lambda kv: -kv[1])
    return {
        "stop_reasons": [(k, f"{v:,}", f"{v / tasks:.1%}") for k, v in by_count],
        "roles": [(role, *_usage_cells(u)) for role, u in sorted(s.usage_by_role.items())],
        "errors": [(k, f"{v:,}") for k, v in sorted(s.errors.items(), key=lambda kv: -kv[1])],
    }


def _usage_cells(u: Usage) -> tuple[str, ...]:
    """A role's calls and tokens, what this run paid for them, what the response cache saved it, and what the
    provider's prompt cache saved it."""
    counts = (u.calls, u.input_tokens, u.output_tokens, u.cached_tokens, u.cache_hits)
    money = (u.spent_usd, u.saved_usd, u.prompt_cache_saved_usd)
    return (*(f"{n:,}" for n in counts), *(f"${usd:,.4f}" for usd in money))


def _run_line(manifest: dict[str, Any]) -> str:
    config = manifest.get("config") or {}
    return (
        f"scenario {config.get('scenario', '?')} · strategy {config.get('strategy', '?')} · "
        f"K={config.get('samples', '?')} · max rounds {config.get('max_rounds', '?')} · "
        f"drafter {config.get('drafter', '?')} · critic {config.get('critic', '?')} · "
        f"started {manifest.get('started_at', '?')}"
    )


def plot_figures(s: Summary, figures: RunFigures, spent: SpendingView | None = None) -> list[tuple[Figure, str]]:
    """The report's plots, each with its alt text."""
    shown: list[tuple[Figure, str]] = []
    feedback, graded, active = figures.pass_curves()
    if feedback:
        by_round = plots.pass_rate_by_round(feedback, graded, active, graded_tasks=figures.graded.tasks)
        shown.append((by_round, "graded and feedback pass rate per round"))
    edges = [i / BINS for i in range(BINS + 1)]
    shown.append((plots.score_distribution(edges, figures.before, figures.after), "feedback score distribution"))
    if s.stop_reasons:
        shown.append((plots.horizontal_bars(s.stop_reasons, "Stop reasons", "tasks"), "stop reasons"))
    roles = {r: (u.input_tokens, u.output_tokens) for r, u in s.usage_by_role.items()}
    if roles:
        shown.append((plots.tokens_by_role(roles), "tokens per role"))
    if spent is not None:
        shown.append((plots.calls_over_the_batch(spent.labels, spent.counts), "calls by action over the batch"))
    return shown
