"""The live progress of a run or a comparison: tasks done of total, pass rates so far (each named by its basis:
the held-out grade's once a task has one, and the feedback's), rate, ETA, and, before tasks finish, the run's
life (`redraft.cli._life`: elapsed, calls and tokens so far, the model's decode rate, tasks by round)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeRemainingColumn
from rich.text import Text

from redraft.cli._life import calls_eta, elapsed, life_text

if TYPE_CHECKING:  # the actor system is loaded by the command that runs, not by `redraft --help`
    from redraft.actors import EndpointState, Live
    from redraft.engine.estimate import Estimate
    from redraft.protocols.messages import Result

err = Console(stderr=True)


class _RateColumn(ProgressColumn):
    def __init__(self, unit: str = "tasks") -> None:
        super().__init__()
        self._unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:.2f} {self._unit}/s")


class _EtaColumn(ProgressColumn):
    """The ETA from calls when there is one (``task.fields["calls_eta"]``), else rich's from the tasks done."""

    def __init__(self) -> None:
        super().__init__()
        self._tasks = TimeRemainingColumn()

    def render(self, task: Task) -> Text:
        seconds = task.fields.get("calls_eta")
        if seconds is None or task.finished:
            return self._tasks.render(task)
        return Text(elapsed(seconds), style="progress.remaining")


class RunProgress:
    """The live bar: tasks done of total, pass rate so far, rate, ETA, and each throttled or adaptive endpoint's
    calls in flight (of what its limiter allows now) and throttles.

    Beside the bar, the run's life as the dispatch loop tells it (`live`): elapsed, calls and tokens so far, the
    model's decode rate, the tasks in flight by round, a model host starved of CPU; the ETA is the calls' (from
    the estimate's expected calls, `expect`) once a call has ended, the tasks' before that if any finished.

    When stderr is not a terminal (``ray job submit`` logs, CI), the same figures
    are printed as a plain line at most every `LOG_EVERY_S` seconds, and at the end; and while no task
    finishes, a heartbeat every `HEARTBEAT_S` seconds (tasks done, and the run's life), so a slow
    run is never silent. What the run does before its first task (resuming, starting Ray and its actors)
    is said at once, in both modes.
    """

    LOG_EVERY_S = 10.0
    HEARTBEAT_S = 30.0

    def __init__(self, starting: str = "starting Ray and the run's actors") -> None:
        self._plain = not err.is_terminal
        self._starting = starting
        self._expected_calls: int | None = None
        self._started = self._last_log = 0.0
        self._total = 0
        self._bar = Progress(
            TextColumn("[bold]refining"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[pass_rate]}"),
            _RateColumn(),
            TextColumn("ETA"),
            _EtaColumn(),
            TextColumn("{task.fields[life]}", markup=False),
            TextColumn("{task.fields[endpoints]}", markup=False),
            console=err,
        )
        self._id: Any = None
        self._done = self._passed = self._graded = self._graded_passed = 0
        self._endpoints = ""
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
        if self._id is None and already_done < total:
            print(f"redraft: {self._starting}", file=sys.stderr, flush=True)  # a log line, never wrapped
        self._total += total - already_done
        if self._id is not None:  # another lane of a comparison
            self._bar.update(self._id, total=self._total)
            return
        if not self._plain:
            self._bar.start()
        self._id = self._bar.add_task(
            "run", total=self._total, pass_rate="pass -", endpoints=self._endpoints, life="", calls_eta=None
        )
        self._started = self._last_log = time.monotonic()

    def endpoints(self, states: list[EndpointState]) -> None:
        """The endpoints' limiters, as the run's driver last heard from them."""
        self._endpoints = endpoints_text(states)
        if self._id is not None:
            self._bar.update(self._id, endpoints=self._endpoints)

    def expect(self, estimate: Estimate) -> None:
        """The run's estimate, told before it starts: its expected calls give the ETA from calls."""
        self._expected_calls = estimate.expected.total.calls or None

    def live(self, live: Live) -> None:
        """Told on every turn of the dispatch loop: the run's life beside the bar, and the heartbeat, when nothing
        else was said for a while."""
        if self._id is None:
            return
        now = time.monotonic()
        text = life_text(live, now - self._started, self._expected_calls)
        self._bar.update(self._id, life=text, calls_eta=calls_eta(live, now - self._started, self._expected_calls))
        if self._plain and now - self._last_log >= self.HEARTBEAT_S:
            self._last_log = now
            print(f"refining: {self._done}/{self._total} tasks done, {text}", file=sys.stderr, flush=True)

    def advance(self, result: Result) -> None:
        self.first_task = self.first_task or result.task_id
        self._done += 1
        self._passed += result.passed
        if result.graded_pass is not None:
            self._graded += 1
            self._graded_passed += result.graded_pass
        self._bar.update(self._id, advance=1, pass_rate=self.rates())
        now = time.monotonic()
        if self._plain and (now - self._last_log >= self.LOG_EVERY_S or self._done == self._total):
            self._last_log = now
            rate = self._done / max(now - self._started, 1e-9)
            eta = (self._total - self._done) / rate
            print(
                f"refining: {self._done}/{self._total} tasks, {self.rates()}, "
                f"{rate:.2f} tasks/s, ETA {eta:.0f} s" + (f", {self._endpoints}" if self._endpoints else ""),
                file=sys.stderr,
                flush=True,
            )

    def rates(self) -> str:
        """The pass rates so far, each named: the held-out grade's (of the tasks graded) and the feedback's."""
        feedback = f"feedback pass {self._passed / max(self._done, 1):.0%}"
        if not self._graded:
            return feedback
        return f"graded pass {self._graded_passed / self._graded:.0%}, {feedback}"


def endpoints_text(states: list[EndpointState]) -> str:
    """``openai:gpt-4o-mini 12/16 in flight, 3 throttled`` for each endpoint whose limiter adapts or was
    throttled ('' for none: a run on the embedded model shows nothing)."""
    shown = []
    for state in states:
        if state.window is None and not state.throttled:
            continue
        allowed = "" if state.window is None else f"/{int(state.window)}"
        throttled = f", {state.throttled} throttled" if state.throttled else ""
        shown.append(f"{state.endpoint} {state.in_flight}{allowed} in flight{throttled}")
    return "; ".join(shown)


class CountProgress:
    """A bar of things done of a known total, with rate and ETA (``judging: 12/96 judgments, 0.40
    judgments/s, ETA 3:30``); a plain line at most every `RunProgress.LOG_EVERY_S` seconds, and at the end,
    when stderr is not a terminal."""

    def __init__(self, label: str, unit: str) -> None:
        self._label, self._unit = label, unit
        self._plain = not err.is_terminal
        self._bar = Progress(
            TextColumn(f"[bold]{label}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(unit),
            _RateColumn(unit),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=err,
        )
        self._id: Any = None
        self._done = self._total = 0
        self._started = self._last_log = 0.0

    def __enter__(self) -> CountProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._id is not None and not self._plain:
            self._bar.stop()

    def start(self, total: int) -> None:
        self._total = total
        self._started = self._last_log = time.monotonic()
        if not self._plain:
            self._bar.start()
        self._id = self._bar.add_task(self._label, total=total)

    def advance(self) -> None:
        self._done += 1
        self._bar.update(self._id, advance=1)
        now = time.monotonic()
        if self._plain and (now - self._last_log >= RunProgress.LOG_EVERY_S or self._done == self._total):
            self._last_log = now
            rate = self._done / max(now - self._started, 1e-9)
            print(
                f"{self._label}: {self._done}/{self._total} {self._unit}, {rate:.2f} {self._unit}/s, "
                f"ETA {(self._total - self._done) / rate:.0f} s",
                file=sys.stderr,
                flush=True,
            )
