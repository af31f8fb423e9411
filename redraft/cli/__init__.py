"""The ``redraft`` command. Errors end here as one line on stderr (a refused resume adds a line per differing
setting), never a traceback.

Exit codes: 0 done; 1 the run failed (refused credentials, a backend down for
good, a role no live node can host: a rerun with the same --out resumes); 2 a
usage error (bad flag, unknown scenario, strategy or backend spec, missing model
file, a cluster address where nothing answers); 3 a run budget stopped dispatch
before every task ran; 4 ``redraft compare --fail-if-worse`` found an arm worse
than its baseline; 5 ``redraft judge calibrate`` measured a judge whose card failed.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer import Abort, Exit

# Every command-line error typer raises (its vendored click's UsageError and BadParameter among
# them) derives from this public class: they are printed as one line.
from typer.exceptions import TyperException

from redraft.cli._compare_estimate import estimate_comparison
from redraft.cli._estimate import said_before, show_estimate, warnings
from redraft.cli._judge import judge_app
from redraft.cli._next_steps import next_steps
from redraft.cli._options import compare_parameters, run_parameters, tune_parameters
from redraft.cli._progress import RunProgress
from redraft.cli._report import report_command
from redraft.cli._serve import serve_command
from redraft.cli._signals import EXIT_INTERRUPTED, StopRequest, stop_on_signals
from redraft.cli._view import view_command
from redraft.cli._warning_lines import show_warnings_as_lines
from redraft.errors import Interrupted, RedraftError, UserError

if TYPE_CHECKING:
    from redraft.config import RunConfig

app = typer.Typer(
    name="redraft",
    help="Refine LLM outputs in loops of draft, critique, verify and decide, on Ray.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # every command inherits them
)
app.add_typer(judge_app)
err = Console(stderr=True)
out = Console()

EXIT_FAILED, EXIT_USAGE, EXIT_BUDGET, EXIT_REGRESSION = 1, 2, 3, 4


def _print_version(asked: bool) -> None:
    """``redraft VERSION``, the installed distribution's (what pip and a bug report name), then exit."""
    if asked:
        print(f"redraft {importlib.metadata.version('redraft')}")
        raise Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """The options before a command (--version, --help)."""


@app.command("scenarios")
def list_scenarios() -> None:
    """List the registered scenarios, one name per line."""
    from redraft.scenarios import scenario_names

    for name in scenario_names():
        print(name)


@app.command("strategies")
def list_strategies() -> None:
    """List the registered critic strategies, one name per line, then what each does."""
    from redraft.strategies import get_strategy, strategy_names

    names = strategy_names()
    for name in names:
        print(name)
    print()
    for name in names:
        doc = (type(get_strategy(name)).__doc__ or "").strip().splitlines()[0]
        print(f"  {name:<18} {doc}")


def run_command(scenario: str | None, check: str | None, grade: str | None, model: str | None, **settings: Any) -> None:
    """Refine a scenario's tasks and write a run directory. Rerun with the same --out to resume."""
    from redraft.actors import RunHooks
    from redraft.actors.driver import run
    from redraft.config import RunConfig

    given = {name: value for name, value in settings.items() if value is not None}  # the rest: the config's defaults
    grade = _judged_grade(grade, given)
    name = _scenario_name(scenario, given.get("tasks"), check, grade)
    config = RunConfig.build(scenario=name, model=model, **given)
    if config.runtime.dry_run:
        _dry_run(config)
        return
    progress = RunProgress(_starting(config))
    with stop_on_signals() as stop, progress:
        try:
            hooks = RunHooks(
                on_start=progress.start,
                on_result=progress.advance,
                on_endpoints=progress.endpoints,
                on_estimate=lambda estimate: said_before(estimate, config, progress.expect),
                on_live=progress.live,
                stop=stop.event,
            )
            outcome = run(config, hooks=hooks)
        except Interrupted as exc:
            _interrupted(exc, stop)
    _print_summary(outcome, oracle=config.experiment.oracle_feedback, config=config.flat())
    experiment = config.experiment
    models = [experiment.drafter, experiment.critic, *([experiment.verifier] if experiment.verifier else [])]
    for line in next_steps(outcome.out, models, first_task=progress.first_task):
        print(line)
    if outcome.summary.stopped_by:
        print(
            f"redraft: stopped: {outcome.summary.stopped_by}; rerun with the same --out and a larger budget to go on",
            file=sys.stderr,
        )
        sys.exit(EXIT_BUDGET)


run_command.__signature__ = inspect.Signature(run_parameters())  # type: ignore[attr-defined]
app.command("run")(run_command)


def _starting(config: RunConfig) -> str:
    """What the run says it does before its first task: Ray and the actors, and the embedded model's load."""
    e = config.experiment
    local = any(s.split(":")[0] == "local" for s in (e.drafter, e.critic, e.verifier or ""))
    ray = "joining the Ray cluster" if config.runtime.address else "starting Ray"
    return f"{ray} and the run's actors" + ("; the model loads on each node with its first call" if local else "")


def _dry_run(config: RunConfig) -> None:
    """``redraft run --dry-run``: the estimate's table, a warning for each run budget it is over, and nothing run."""
    from redraft.actors.driver import estimate

    made = estimate(config)
    show_estimate(made, config, out)
    for line in warnings(made, config):
        print(line, file=sys.stderr)
    print("dry run: no model was called and nothing was written; leave out --dry-run to run it", file=sys.stderr)


def compare_command(
    scenario: str | None,
    check: str | None,
    grade: str | None,
    model: str | None,
    arms: str | None,
    arms_file: Path | None,
    baseline_samples: int | None,
    match: str,
    repeats: int,
    baseline: Path | None,
    fail_if_worse: bool,
    judge_card: Path | None,
    pairwise: bool,
    trust_judge: bool,
    **settings: Any,
) -> None:
    """Compare critic strategies on the same tasks, against sampling at matched cost; rerun to resume."""
    from redraft.cli._compare import compare
    from redraft.cli._gate import said_gate

    if fail_if_worse and baseline is None:
        raise UserError("--fail-if-worse needs --baseline OLD/comparison.json: the comparison to hold this one against")
    given = {name: value for name, value in settings.items() if value is not None}
    grade = _judged_grade(grade, given)
    given |= {role: model for role in ("drafter", "critic") if model is not None and role not in given}
    name = _scenario_name(scenario, given.get("tasks"), check, grade)
    if given.pop("dry_run", False):  # every lane estimated, nothing run
        return estimate_comparison(name, given, arms, arms_file, baseline_samples, repeats, out)
    with stop_on_signals() as stop:
        try:
            done = compare(
                scenario=name,
                settings=given,
                arms=arms,
                arms_file=arms_file,
                baseline_samples=baseline_samples,
                match=match,
                repeats=repeats,
                previous=baseline,
                judge_card=judge_card,
                pairwise=pairwise,
                gated=fail_if_worse and not trust_judge,
                progress=RunProgress(),
                console=out,
                stop=stop.event,
            )
        except Interrupted as exc:
            _interrupted(exc, stop)
    if said_gate(done) and fail_if_worse:
        sys.exit(EXIT_REGRESSION)


compare_command.__signature__ = inspect.Signature(compare_parameters())  # type: ignore[attr-defined]
app.command("compare")(compare_command)


def tune_command(
    scenario: str | None,
    check: str | None,
    grade: str | None,
    model: str | None,
    proposer: str | None,
    sections: str,
    split: str,
    minibatch: int,
    max_proposals: int,
    parallel: int,
    examples: int,
    train_labels: Path | None,
    **settings: Any,
) -> None:
    """Tune the prompts on train tasks; adopt the best only if it wins on a test split read once. Rerun to resume."""
    from redraft.cli._tune import TuneProgress, said_outcome
    from redraft.config import RunConfig
    from redraft.tuning import TuneHooks, TuneSettings, parse_fractions, tune

    given = {name: value for name, value in settings.items() if value is not None}
    grade = _judged_grade(grade, given)
    config = RunConfig.build(scenario=_scenario_name(scenario, given.get("tasks"), check, grade), model=model, **given)
    chosen = TuneSettings(
        sections=[s.strip() for s in sections.split(",") if s.strip()],
        split=parse_fractions(split),
        minibatch=minibatch,
        max_proposals=max_proposals,
        parallel=parallel,
        examples=examples,
        proposer=proposer,
        train_labels=train_labels,
    )
    progress = TuneProgress()
    with stop_on_signals() as stop, progress:
        try:
            done = tune(config, chosen, hooks=TuneHooks(on_status=progress.status, say=progress.say, stop=stop.event))
        except Interrupted as exc:
            _interrupted(exc, stop)
    said_outcome(done)


tune_command.__signature__ = inspect.Signature(tune_parameters())  # type: ignore[attr-defined]
app.command("tune")(tune_command)
app.command("serve")(serve_command)


def _interrupted(exc: Interrupted, stop: StopRequest) -> NoReturn:
    """A stopped run's one line, and the exit code of the signal that stopped it (130 for Ctrl-C)."""
    print(f"redraft: {exc}; rerun with the same --out to resume", file=sys.stderr)
    sys.exit(stop.exit_code)


RUBRIC_GRADE = "rubric:"


def _judged_grade(grade: str | None, given: dict[str, Any]) -> str | None:
    """``--grade rubric:FILE`` said as ``--rubric FILE`` (the judge's grade; None left of --grade), or ``grade``,
    a user's grade function, as it was; `UserError` when both name a rubric."""
    if grade is None or not grade.startswith(RUBRIC_GRADE):
        return grade
    if given.get("rubric") is not None:
        raise UserError("--grade rubric:FILE and --rubric FILE name the judge's rubric twice: give one of the two")
    given["rubric"] = grade.removeprefix(RUBRIC_GRADE)
    return None


def _scenario_name(scenario: str | None, tasks: str | None, check: str | None, grade: str | None) -> str:
    """The scenario a run uses: SCENARIO, or ``check:MODULE:FUNCTION`` (with its grade) for a task file."""
    from redraft.scenarios.user_check import user_scenario_name

    if check is None:
        if grade is not None:
            raise UserError("--grade goes with --check: it grades the --tasks that the check steers")
        if scenario is None:
            raise UserError("missing SCENARIO: name one (see `redraft scenarios`), or use --tasks FILE --check MOD:FN")
        return scenario
    if tasks is None:
        raise UserError("--check needs --tasks FILE.jsonl: the tasks it scores")
    if scenario is not None:
        raise UserError(f"give a SCENARIO or --check, not both (got {scenario!r} and --check {check})")
    return user_scenario_name(check, grade)


def _print_summary(outcome: Any, *, oracle: bool = False, config: dict[str, Any] | None = None) -> None:
    from redraft.views.summary_table import graded_by, summary_rows

    table = Table(title=f"redraft run: {outcome.out}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for label, value in summary_rows(outcome.summary, breakdowns=True, oracle=oracle, judge=graded_by(config or {})):
        table.add_row(Text(label), Text(value))  # Text: a model or role name is never markup
    out.print(table)


RunDir = Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run directory (the --out of `redraft run`).")]


app.command("report")(report_command)
app.command("view")(view_command)


@app.command("trace")
def trace_command(
    run_dir: RunDir,
    task_id: Annotated[str, typer.Argument(metavar="TASK_ID", help="The task's id, as in results.jsonl.")],
    messages: Annotated[
        bool, typer.Option("--messages", help="Show every message each model call was sent (system prompts included).")
    ] = False,
) -> None:
    """Show one task's rounds in the terminal, with diffs."""
    from redraft.views.trace import show_trace

    show_trace(run_dir, task_id, out, messages=messages)


@app.command("export")
def export_command(
    run_dir: RunDir,
    fmt: Annotated[str, typer.Option("--format", help="parquet, csv, or otel (spans to --endpoint).")] = "parquet",
    table: Annotated[
        str, typer.Option(help="results (a row per task) or rounds (a row per task and round).")
    ] = "results",
    out_path: Annotated[Path | None, typer.Option("--out", help="Output file (default RUN_DIR/TABLE.FORMAT).")] = None,
    endpoint: Annotated[
        str | None, typer.Option(help="With --format otel: the OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318.")
    ] = None,
) -> None:
    """Write a run as a flat Parquet or CSV table for analysis, or send its spans to an OTLP endpoint."""
    from redraft.cli._export import export_run

    print(export_run(run_dir, fmt, table, out_path, endpoint))


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning every expected error into one line and an exit code."""
    show_warnings_as_lines()
    try:
        app(args=argv, standalone_mode=False)
    except Exit as exc:
        sys.exit(exc.exit_code)
    except TyperException as exc:
        if message := _usage_message(exc):
            print(f"redraft: error: {message}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except (Abort, KeyboardInterrupt):
        print("redraft: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except UserError as exc:
        print(f"redraft: error: {exc}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except RedraftError as exc:
        print(f"redraft: failed: {exc}", file=sys.stderr)
        sys.exit(EXIT_FAILED)


def _usage_message(exc: TyperException) -> str | None:
    """The error, and for a usage error (one that knows its command) where to read the usage.

    None when there is nothing to say: no arguments at all, and the help was printed instead. The text
    is the formatted message, not ``exc.message``, which is empty for a missing argument (its text is
    made when formatted).
    """
    text = exc.format_message()
    if not text:
        return None
    context = getattr(exc, "ctx", None)
    return text if context is None else f"{text} (see `{context.command_path} --help`)"
