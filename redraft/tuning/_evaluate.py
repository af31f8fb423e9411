"""One candidate over one set of tasks: an ordinary run, on the cluster, read back as figures per task.

The run is `redraft.actors.driver.run` over a task file of the set, with the candidate's prompts file, served
by the tune's one fleet of role actors (``fleets``: the prompts travel with the run, not in the actors):
resumable, reportable (``redraft report`` opens it), and fingerprinted by the prompts' versions and
texts, so two candidates never share a run directory's answers. Each task's figure is its held-out
grade (a task that ended in error scores 0: the task, not the machinery, failed it), the judge's rubric
score when the tune has a ``--judge`` (named in ``judge``); for a scenario with no grade, its feedback score,
and the evaluation says so (``graded``). The proposer never reads a grade (`redraft.tuning._examples`), the
judge's no more than the scenario's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from redraft.actors import Fleets, RunHooks
from redraft.actors.driver import run
from redraft.config import RunConfig
from redraft.engine import Plugins
from redraft.engine.resolution import BackendOverrides
from redraft.protocols.messages import Result, Usage
from redraft.rundir.reader import RunReader
from redraft.tuning._journal import Evaluation


class Evaluator(Protocol):
    def __call__(self, candidate: str, on: str, prompts: Path, tasks: Path, out: Path) -> Evaluation: ...

    def close(self) -> None:
        """The tune has run its last evaluation: stop what the evaluations shared."""
        ...


StartHook = Callable[[str, int, int], None]
ResultHook = Callable[[str, Result], None]


@dataclass
class RunEvaluator:
    """Evaluations as runs of ``config`` (its scenario, models and strategy) on Ray."""

    config: RunConfig
    root: Path
    backends: BackendOverrides | None = None
    stop: threading.Event | None = None
    on_start: StartHook | None = None
    on_result: ResultHook | None = None
    parallel: int = 1
    """Evaluations run at once: with a fleet each, each one's actors that run candidates reserve that share of a
    CPU."""
    fleets: Fleets = field(default_factory=Fleets)
    """The tune's fleets: one serves every evaluation (started with the first), unless ``REDRAFT_FLEET=per-run``."""

    def close(self) -> None:
        """Stop the fleets, once the tune has run its last evaluation."""
        self.fleets.shutdown()

    def __call__(self, candidate: str, on: str, prompts: Path, tasks: Path, out: Path) -> Evaluation:
        label = f"{candidate} on {on}"
        config = self.config.replace(
            tasks=str(tasks), columns=None, prompts=str(prompts), out=str(out), limit=None, **_NO_RUN_BUDGETS
        )
        started, landed = self.on_start, self.on_result
        hooks = RunHooks(
            on_start=None if started is None else lambda total, done: started(label, total, done),
            on_result=None if landed is None else lambda result: landed(label, result),
            stop=self.stop or threading.Event(),
            fleets=self.fleets,
            cpu_share=1.0 if self.fleets.shared else 1.0 / self.parallel,
        )
        run(config, Plugins(backends=self.backends), hooks)
        return read_evaluation(candidate, on, out, self.root)


_NO_RUN_BUDGETS = {"budget_usd": None, "budget_tokens": None, "budget_calls": None}
"""A tune's budgets are the whole tune's (`redraft.tuning._budget`), never one evaluation's."""


def read_evaluation(candidate: str, on: str, out: Path, root: Path) -> Evaluation:
    """The figures of a finished evaluation's run directory."""
    figures: dict[str, float] = {}
    feedback: dict[str, float] = {}
    usage = Usage()
    graded = False
    for result in RunReader(out).finished():
        graded = graded or result.grade is not None
        figures[result.task_id] = figure_of(result)
        feedback[result.task_id] = 0.0 if result.error is not None else result.score
        usage = usage + result.usage
    if not graded:
        figures = dict(feedback)
    judge = (RunReader(out).manifest().get("config") or {}).get("judge") if graded else None
    return Evaluation(
        candidate=candidate,
        on=on,
        figures=figures,
        feedback=feedback,
        graded=graded,
        usage=usage,
        run=str(out.relative_to(root)),
        judge=judge,
    )


def figure_of(result: Result) -> float:
    """A task's graded figure: its grade, 0 for a task that ended in error or has none."""
    if result.error is not None or result.grade is None:
        return 0.0
    return float(result.grade)
