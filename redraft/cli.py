"""The ``redraft`` command. Errors end here as one line on stderr, never a traceback.

Exit codes: 0 done; 1 the run failed (a backend or the cluster, refused
credentials); 2 a usage error (bad flag, unknown scenario, strategy or backend
spec, missing model file); 3 a run budget stopped dispatch before every task ran.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

# typer 0.29 vendors click and re-exports only some of its exceptions; the usage
# errors are needed to print them as one line. Pinned in pyproject.toml.
from typer import Abort, Exit
from typer._click.exceptions import ClickException, UsageError

from redraft.errors import RedraftError, UserError
from redraft.protocols.messages import Result

app = typer.Typer(
    name="redraft",
    help="Refine LLM outputs in loops of draft, critique, verify and decide, on Ray.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)
out = Console()

EXIT_FAILED, EXIT_USAGE, EXIT_BUDGET = 1, 2, 3


@app.command("scenarios")
def list_scenarios() -> None:
    """List the registered scenarios, one name per line."""
    from redraft.scenarios import scenario_names

    for name in scenario_names():
        print(name)


@app.command("strategies")
def list_strategies() -> None:
    """List the registered critic strategies, one name per line, then what each does."""
    from redraft.protocols.strategies import get_strategy, strategy_names

    names = strategy_names()
    for name in names:
        print(name)
    print()
    for name in names:
        doc = (type(get_strategy(name)).__doc__ or "").strip().splitlines()[0]
        print(f"  {name:<18} {doc}")


@app.command("run")
def run_command(
    scenario: Annotated[
        str | None,
        typer.Argument(metavar="SCENARIO", help="Scenario name (see `redraft scenarios`); leave out with --check."),
    ] = None,
    tasks: Annotated[
        Path | None, typer.Option(help="Task file (JSON lines) to run instead of the scenario's own tasks.")
    ] = None,
    check: Annotated[
        str | None, typer.Option(help="MODULE:FUNCTION that scores the --tasks (instead of a SCENARIO).")
    ] = None,
    strategy: Annotated[str, typer.Option(help="Critic strategy (see `redraft strategies`).")] = "adversarial",
    samples: Annotated[int, typer.Option("--samples", "-k", help="Drafts per round (self-consistency K).")] = 3,
    max_rounds: Annotated[int, typer.Option(help="Cycle limit: rounds in all, the first draft included.")] = 3,
    threshold: Annotated[float, typer.Option(help="Stop a task once its best score reaches this.")] = 1.0,
    patience: Annotated[int, typer.Option(help="Stop after this many rounds without improvement.")] = 2,
    limit: Annotated[int | None, typer.Option(help="Run only the first N tasks.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for generated tasks and sampling.")] = 0,
    model: Annotated[str, typer.Option(help="Backend spec for every model role.")] = "local",
    drafter: Annotated[str | None, typer.Option(help="Backend spec for the drafter (overrides --model).")] = None,
    critic: Annotated[str | None, typer.Option(help="Backend spec for the critic (overrides --model).")] = None,
    verifier: Annotated[
        str | None, typer.Option(help="Backend spec for model-based checks (overrides --model).")
    ] = None,
    temperature: Annotated[float, typer.Option(help="Drafter sampling temperature.")] = 0.8,
    max_tokens: Annotated[int, typer.Option(help="Maximum tokens per draft.")] = 128,
    patch: Annotated[
        bool, typer.Option("--patch", help="Revise with minimal search/replace edits instead of rewrites.")
    ] = False,
    task_budget_usd: Annotated[float | None, typer.Option(help="Stop a task once it has cost this much.")] = None,
    task_budget_tokens: Annotated[int | None, typer.Option(help="Stop a task after this many tokens.")] = None,
    task_budget_calls: Annotated[int | None, typer.Option(help="Stop a task after this many model calls.")] = None,
    task_timeout: Annotated[
        float | None, typer.Option(help="Stop a task after this many seconds, keeping its best so far.")
    ] = None,
    budget_usd: Annotated[float | None, typer.Option(help="Run budget: dispatch no task once spent.")] = None,
    budget_tokens: Annotated[int | None, typer.Option(help="Run budget in tokens.")] = None,
    budget_calls: Annotated[int | None, typer.Option(help="Run budget in model calls.")] = None,
    budget_seconds: Annotated[
        float | None, typer.Option(help="Run budget in wall-clock seconds: in-flight tasks stop at the deadline.")
    ] = None,
    prices: Annotated[
        Path | None, typer.Option(help="JSON price file (USD per million tokens) over the built-in table.")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not answer repeated calls from the cache.")] = False,
    max_in_flight: Annotated[
        int | None,
        typer.Option(
            "--max-tasks-in-flight",
            "--max-in-flight",
            help="Tasks dispatched at once (default: 4 per node with a local model, else 64).",
        ),
    ] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Run directory (default runs/<run-id>).")] = None,
    address: Annotated[
        str | None, typer.Option(help="Join this Ray cluster (e.g. auto); default: start a local Ray.")
    ] = None,
) -> None:
    """Refine a scenario's tasks and write a run directory. Rerun with the same --out to resume."""
    from redraft.batch import RunConfig, run

    config = RunConfig(
        scenario=_scenario_name(scenario, tasks, check),
        tasks=str(tasks) if tasks else None,
        strategy=strategy,
        samples=samples,
        max_rounds=max_rounds,
        threshold=threshold,
        patience=patience,
        seed=seed,
        drafter=drafter or model,
        critic=critic or model,
        verifier=verifier,
        temperature=temperature,
        max_tokens=max_tokens,
        patch=patch,
        out=str(out_dir) if out_dir else None,
        address=address,
        limit=limit,
        task_max_usd=task_budget_usd,
        task_max_tokens=task_budget_tokens,
        task_max_calls=task_budget_calls,
        task_timeout=task_timeout,
        budget_usd=budget_usd,
        budget_tokens=budget_tokens,
        budget_calls=budget_calls,
        budget_seconds=budget_seconds,
        prices=str(prices) if prices else None,
        cache=not no_cache,
        max_in_flight=max_in_flight,
    )
    progress = _RunProgress()
    with progress:
        outcome = run(config, on_start=progress.start, on_result=progress.advance)
    _print_summary(outcome)
    if outcome.summary.stopped_by:
        print(
            f"redraft: stopped: {outcome.summary.stopped_by}; rerun with the same --out and a larger budget to go on",
            file=sys.stderr,
        )
        sys.exit(EXIT_BUDGET)


def _scenario_name(scenario: str | None, tasks: Path | None, check: str | None) -> str:
    """The scenario a run uses: SCENARIO, or ``check:MODULE:FUNCTION`` for a task file with a user check."""
    if check is None:
        if scenario is None:
            raise UserError("missing SCENARIO: name one (see `redraft scenarios`), or use --tasks FILE --check MOD:FN")
        return scenario
    if tasks is None:
        raise UserError("--check needs --tasks FILE.jsonl: the tasks it scores")
    if scenario is not None:
        raise UserError(f"give a SCENARIO or --check, not both (got {scenario!r} and --check {check})")
    return f"check:{check}"


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:.2f} tasks/s")


class _RunProgress:
    """The live bar: tasks done of total, pass rate so far, rate, ETA.

    When stderr is not a terminal (``ray job submit`` logs, CI), the same figures
    are printed as a plain line at most every `LOG_EVERY_S` seconds, and at the end.
    """

    LOG_EVERY_S = 10.0

    def __init__(self) -> None:
        self._plain = not err.is_terminal
        self._started = self._last_log = 0.0
        self._total = 0
        self._bar = Progress(
            TextColumn("[bold]refining"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("pass {task.fields[pass_rate]}"),
            _RateColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=err,
        )
        self._id: Any = None
        self._done = self._passed = 0

    def __enter__(self) -> _RunProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._id is not None:  # started: the run got past validation
            self._bar.stop()

    def start(self, total: int, already_done: int) -> None:
        if not self._plain:
            self._bar.start()
        if already_done:
            err.print(f"resuming: {already_done} of {total} tasks already done")
        self._total = total - already_done
        self._id = self._bar.add_task("run", total=self._total, pass_rate="-")
        self._started = self._last_log = time.monotonic()

    def advance(self, result: Result) -> None:
        self._done += 1
        self._passed += result.passed
        self._bar.update(self._id, advance=1, pass_rate=f"{self._passed / self._done:.0%}")
        now = time.monotonic()
        if self._plain and (now - self._last_log >= self.LOG_EVERY_S or self._done == self._total):
            self._last_log = now
            rate = self._done / max(now - self._started, 1e-9)
            eta = (self._total - self._done) / rate
            print(
                f"refining: {self._done}/{self._total} tasks, pass {self._passed / self._done:.0%}, "
                f"{rate:.2f} tasks/s, ETA {eta:.0f} s",
                file=sys.stderr,
                flush=True,
            )


def _print_summary(outcome: Any) -> None:
    from redraft.views.summary_table import summary_rows

    table = Table(title=f"redraft run: {outcome.out}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for label, value in summary_rows(outcome.summary, breakdowns=True):
        table.add_row(Text(label), Text(value))  # Text: a model or role name is never markup
    out.print(table)


RunDir = Annotated[Path, typer.Argument(help="A run directory (the --out of `redraft run`).")]


@app.command("report")
def report_command(
    run_dir: RunDir,
    max_pages: Annotated[
        int | None, typer.Option(help="Write task pages for the first N tasks only (default: every task).")
    ] = None,
) -> None:
    """Write report.html: plots, tables, and a page per task."""
    from redraft.views.report import write_report

    if max_pages is not None and max_pages < 0:
        raise UserError(f"--max-pages must be at least 0, got {max_pages}")
    print(write_report(run_dir, max_pages=max_pages))


@app.command("trace")
def trace_command(
    run_dir: RunDir,
    task_id: Annotated[str, typer.Argument(help="The task's id, as in results.jsonl.")],
) -> None:
    """Show one task's rounds in the terminal, with diffs."""
    from redraft.views.trace import show_trace

    show_trace(run_dir, task_id, out)


@app.command("export")
def export_command(
    run_dir: RunDir,
    fmt: Annotated[str, typer.Option("--format", help="parquet or csv.")] = "parquet",
    table: Annotated[
        str, typer.Option(help="results (a row per task) or rounds (a row per task and round).")
    ] = "results",
    out_path: Annotated[Path | None, typer.Option("--out", help="Output file (default RUN_DIR/TABLE.FORMAT).")] = None,
) -> None:
    """Write a run as a flat Parquet or CSV table for analysis."""
    from redraft.views.export import export

    path, rows = export(run_dir, fmt, table=table, out=out_path)
    print(f"{path} ({rows} rows)")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning every expected error into one line and an exit code."""
    try:
        app(args=argv, standalone_mode=False)
    except Exit as exc:
        sys.exit(exc.exit_code)
    except UsageError as exc:
        if exc.message:  # empty when no arguments were given and the help was printed
            print(f"redraft: error: {_usage_message(exc)}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except ClickException as exc:
        print(f"redraft: error: {exc.format_message()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except Abort:
        print("redraft: interrupted", file=sys.stderr)
        sys.exit(130)
    except UserError as exc:
        print(f"redraft: error: {exc}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except RedraftError as exc:
        print(f"redraft: failed: {exc}", file=sys.stderr)
        sys.exit(EXIT_FAILED)


def _usage_message(exc: UsageError) -> str:
    message = exc.format_message()
    command = exc.ctx.command_path if exc.ctx is not None else "redraft"
    return f"{message} (see `{command} --help`)"


if __name__ == "__main__":
    main()
