"""``redraft tune`` in the terminal: one line for the tune, the search's own lines above it, the verdict once.

The line is the tune's (`redraft.tuning.TuneStatus`): its phase, iteration k of N, the evaluations and
proposals recorded and what they spent. The evaluations are ordinary runs, but none of their own lines
reaches the terminal (no "resuming" per evaluation, no counts of their tasks added up across them), and an
interruption is said in the tune's terms. On a terminal the line is drawn live; otherwise (logs, CI) it is
printed at each change of phase or of iterations done, and at most every `TuneProgress.LOG_EVERY_S`
seconds for the rest. The verdict is printed once, on stdout, with where the report is.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live
from rich.text import Text

if TYPE_CHECKING:
    from redraft.tuning import TuneOutcome, TuneStatus

err = Console(stderr=True)


def status_line(status: TuneStatus) -> str:
    """``tuning: iteration 3 of 8 (2 done) · 5 evaluations · 2 proposals · $0.0012 spent``."""
    s = status
    where = {
        "start": "the starting prompts on validation",
        "search": f"iteration {min(s.iterations + 1, s.of)} of {s.of} ({s.iterations} done)",
        "verdict": f"the verdict on the test split ({s.iterations} of {s.of} iterations done)",
    }[s.phase]
    evaluations = f"{s.evaluations} evaluation{'' if s.evaluations == 1 else 's'}"
    proposals = f"{s.proposals} proposal{'' if s.proposals == 1 else 's'}"
    return f"tuning: {where} · {evaluations} · {proposals} · ${s.spent.spent_usd:,.4f} spent"


class TuneProgress:
    """The tune's one line (see the module docstring); `say` prints a line of the search above it."""

    LOG_EVERY_S = 10.0

    def __init__(self) -> None:
        self._plain = not err.is_terminal
        self._live: Live | None = None
        self._last: TuneStatus | None = None
        self._logged = 0.0

    def __enter__(self) -> TuneProgress:
        if not self._plain:
            self._live = Live(Text(""), console=err, refresh_per_second=4, transient=False)
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    def say(self, line: str) -> None:
        if self._live is not None:
            err.print(Text(f"redraft: {line}"))  # above the live line
        else:
            print(f"redraft: {line}", file=sys.stderr, flush=True)

    def status(self, status: TuneStatus) -> None:
        line = status_line(status)
        if self._live is not None:
            self._live.update(Text(line))
        elif self._changed(status) or time.monotonic() - self._logged >= self.LOG_EVERY_S:
            self._logged = time.monotonic()
            print(line, file=sys.stderr, flush=True)
        self._last = status

    def _changed(self, status: TuneStatus) -> bool:
        last = self._last
        return last is None or (last.phase, last.iterations) != (status.phase, status.iterations)


def said_outcome(done: TuneOutcome) -> None:
    """The verdict, once, and where the new prompts and the report are (a dry run has said its estimate)."""
    if done.verdict is None:
        return
    print(done.verdict.says)
    if done.verdict.prompts:
        print(f"new prompts: {done.out / done.verdict.prompts}")
    print(f"report: {done.html} and {done.json}")
