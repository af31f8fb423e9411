"""``redraft compare`` on the terminal, end to end: arms and plan, the lanes on Ray, the figures, the files, the gate.

Output under ``--out`` (default ``runs/compare-<id>``): each lane's run directory
(``arms/<name>``, ``baseline``) with its own ``report.html``, then
``comparison.json`` and ``comparison.html``. The terminal gets the arms table,
the notes, and where everything is.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Protocol

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from redraft.actors import EndpointState
from redraft.comparison import (
    MATCHES,
    Arm,
    ComparePlan,
    Comparison,
    arms_from_file,
    arms_from_names,
    default_out,
    judge_note,
    judged_by,
    read_json,
    run_comparison,
    terminal_header,
    terminal_rows,
    untrusted,
    write,
)
from redraft.config import DEFAULT_BASELINE_SAMPLES, RunConfig
from redraft.errors import UserError, unknown_name
from redraft.protocols.messages import Result


class Progress(Protocol):
    def start(self, total: int, already_done: int, what: str = "") -> None: ...

    def advance(self, result: Result) -> None: ...

    def endpoints(self, states: list[EndpointState]) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...


def compare(
    *,
    scenario: str,
    settings: dict[str, Any],
    arms: str | None,
    arms_file: Path | None,
    baseline_samples: int | None,
    match: str,
    repeats: int,
    previous: Path | None,
    progress: Progress,
    console: Console,
    stop: threading.Event | None = None,
    judge_card: Path | None = None,
    gated: bool = False,
    pairwise: bool = False,
) -> Comparison:
    """Run the comparison; its figures, with the gate's verdict against ``previous`` when one is given.

    ``gated``: ``--fail-if-worse`` will decide the exit code on these figures; a judge without a passing card
    (``judge_card``) is then refused before anything runs, in one line (``--trust-judge`` clears ``gated``).
    ``pairwise``: the judge also compares each pair of arms' final answers."""
    if match not in MATCHES:
        raise unknown_name("--match", match, MATCHES)
    plan = make_plan(scenario, settings, arms, arms_file, baseline_samples, repeats)
    if previous is not None:
        read_json(previous)  # a bad --baseline fails before anything runs
    judged = judged_by(plan, judge_card, pairwise=pairwise)
    refusal = untrusted(None if judged is None else judge_note(*judged, []))
    if gated and refusal is not None:
        raise UserError(refusal)
    with plan.held():
        with progress:
            run_comparison(
                plan,
                on_start=lambda label, total, done: progress.start(total, done, label),
                on_result=lambda _label, result: progress.advance(result),
                stop=stop,
                on_endpoints=progress.endpoints,
            )
        done = write(plan, match, previous, judged, pairwise=pairwise)
    print_table(done.comparison, console)
    console.print(Text(f"comparison: {done.json} and {done.html}"))
    return done.comparison


def make_plan(
    scenario: str,
    settings: dict[str, Any],
    arms: str | None,
    arms_file: Path | None,
    baseline_samples: int | None,
    repeats: int,
) -> ComparePlan:
    """The comparison's plan from the command line; `UserError` for what is missing or contradicts itself."""
    if (arms is None) == (arms_file is None):
        raise UserError("name the arms with --arms adversarial,debate,... or --arms-file ARMS.toml (one of the two)")
    chosen: list[Arm]
    file_baseline: dict[str, Any] = {}
    if arms_file is not None:
        chosen, file_baseline = arms_from_file(arms_file)
    else:
        chosen = arms_from_names(arms or "")
    n = baseline_samples or int(file_baseline.get("samples", DEFAULT_BASELINE_SAMPLES))
    out = Path(settings.pop("out", None) or default_out())
    base = RunConfig.build(scenario=scenario, **settings)
    return ComparePlan(base=base, arms=chosen, out=out, baseline_samples=n, repeats=repeats)


NARROW = 110
"""Below this many columns the terminal table leaves out tokens and cost (comparison.html has them)."""
_WIDE_ONLY = {4, 5}


def print_table(comparison: Comparison, console: Console) -> None:
    header = terminal_header(comparison)
    keep = [i for i in range(len(header)) if console.width >= NARROW or i not in _WIDE_ONLY]
    title = f"redraft compare: {comparison.rate_name}s ({comparison.rate_source})"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for i in keep:
        # An arm's name whole (it is what a reader looks for); the rest folds rather than lose characters to "…".
        table.add_column(header[i], no_wrap=i == 0, overflow="fold")
    for row in terminal_rows(comparison):
        table.add_row(*(Text(row[i]) for i in keep))  # Text: an arm's name is never markup
    console.print(table)
    for note in comparison.notes:
        console.print(Text(f"note: {note}"))
