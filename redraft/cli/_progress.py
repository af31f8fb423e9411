"""The live progress of a run or a comparison: tasks done of total, pass rate so far, rate, ETA."""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeRemainingColumn
from rich.text import Text

from redraft.protocols.messages import Result

err = Console(stderr=True)


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:.2f} tasks/s")


class RunProgress:
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
        self.first_task: str | None = None
        """The first task that finished in this invocation (the end of a run names it)."""

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._id is not None:  # started: the run got past validation
            self._bar.stop()

    def start(self, total: int, already_done: int, what: str = "") -> None:
        """A run (or one lane of a comparison, ``what``) opened: its tasks join the bar's total."""
        if already_done:
            err.print(f"resuming{' ' + what if what else ''}: {already_done} of {total} tasks already done")
        self._total += total - already_done
        if self._id is not None:  # another lane of a comparison
            self._bar.update(self._id, total=self._total)
            return
        if not self._plain:
            self._bar.start()
        self._id = self._bar.add_task("run", total=self._total, pass_rate="-")
        self._started = self._last_log = time.monotonic()

    def advance(self, result: Result) -> None:
        self.first_task = self.first_task or result.task_id
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
