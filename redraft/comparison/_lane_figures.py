"""What a comparison measures in each lane's run directory, task by task.

Graded figures use the held-out grade only (``Result.graded_pass``, the `Grade`
frame's per-candidate grades); the loop's feedback is reported beside them,
never instead. A task without a grade is left out of graded figures (unknown,
not 0), and the comparison says how many there were.

For the baseline, per task: its N samples as (feedback score, answer, graded
pass), the input of `redraft.stats`.

A comparison with no held-out grade at all (a user's check without ``--grade``)
is read on the feedback instead (``basis="feedback"``): every "graded" figure is
then the feedback's verdict, what the loop optimised, and the comparison says so.

See docs/architecture.md, section "What a comparison counts for an arm".
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from redraft.protocols.messages import Critique, Decision, Grade, Message, Result, Usage, Verification
from redraft.rundir import refinement_change
from redraft.rundir.frames import Frame, KnownFrame
from redraft.rundir.reader import RunReader
from redraft.stats import Sample

FLAGGING = frozenset({"critical", "major"})

Basis = Literal["grade", "feedback"]
"""What judges a candidate in a comparison: the held-out grade, or, when nothing was held out, the feedback."""


@dataclass
class Counts:
    """How often something happened, out of how many chances."""

    hits: int = 0
    total: int = 0

    def add(self, hit: bool) -> None:
        self.hits += hit
        self.total += 1

    @property
    def rate(self) -> float | None:
        return self.hits / self.total if self.total else None


@dataclass
class TaskFigures:
    """One task of one arm's run."""

    task_id: str
    graded_pass: bool | None
    passed: bool
    initial_graded_pass: bool | None
    calls: int
    tokens: int
    usd: float
    wall_s: float
    by_round: list[bool | None] = field(default_factory=list)
    """The graded pass of the best so far after each decided round."""
    grade_error: str | None = None
    """Why its grade could not be made (it is graded as failed: `redraft.protocols.messages.Result.grade_error`)."""


@dataclass
class Behaviour:
    """What the critic, the revisions and the arbiter did, over a whole arm (see the module docstring)."""

    fixed: dict[int, Counts] = field(default_factory=dict)
    """By round: revisions in that round, and after how many the kept best passed where the entering one failed."""
    broke: dict[int, Counts] = field(default_factory=dict)
    false_alarms: Counts = field(default_factory=Counts)
    """Out of critiqued candidates the grade passed: how many the critic flagged."""
    misses: Counts = field(default_factory=Counts)
    """Out of critiqued candidates the grade failed: how many the critic did not flag."""
    rollbacks_saved: Counts = field(default_factory=Counts)
    """Out of rollbacks: how many kept a passing best from a failing round."""


def arm_figures(root: Path, basis: Basis = "grade") -> tuple[list[TaskFigures], Behaviour]:
    """Every task of an arm's run directory, and the arm's behaviour, streamed one task at a time; ``basis``:
    what judges a candidate (the held-out grade, or the feedback when nothing was held out)."""
    tasks: list[TaskFigures] = []
    behaviour = Behaviour()
    for result, messages in _tasks(root):
        grades = _grades(messages, basis)
        graded = (result.graded_pass, result.initial_graded_pass) if basis == "grade" else None
        spent = method_usage(result)
        tasks.append(
            TaskFigures(
                task_id=result.task_id,
                graded_pass=graded[0] if graded else result.passed,
                passed=result.passed,
                initial_graded_pass=graded[1] if graded else result.initial_passed,
                calls=spent.calls,
                tokens=spent.total_tokens,
                usd=spent.cost_usd,
                wall_s=result.wall_s,
                by_round=_by_round(messages, grades),
                grade_error=result.grade_error,
            )
        )
        _behaviour(messages, grades, behaviour)
    return tasks, behaviour


def method_usage(result: Result) -> Usage:
    """What a task's method spent: its usage without the judge's (``--judge``), which grades every lane alike
    after the loop and is no part of what an arm or a baseline is matched on (a baseline sample of one draft
    would otherwise count its judgment as a second call)."""
    return result.usage - result.usage_by_role.get("judge", Usage())


def baseline_samples(root: Path, basis: Basis = "grade") -> dict[str, list[Sample]]:
    """Each task's samples in the baseline run: feedback score and answer from the loop, pass from the grade
    (from the feedback, when ``basis`` says so)."""
    samples: dict[str, list[Sample]] = {}
    for result, messages in _tasks(root):
        grades = _grades(messages, basis)
        own = [
            Sample(score=m.score, passed=bool(grades.get((m.round, m.sample))), answer=m.answer)
            for m in messages
            if isinstance(m, Verification) and m.stage is None and (m.round, m.sample) in grades
        ]
        if own:
            samples[result.task_id] = own
    return samples


def _tasks(root: Path) -> Iterator[tuple[Result, list[Message]]]:
    for entry, frames in RunReader(root).tasks():
        yield entry.result, _messages(frames)


def _messages(frames: list[Frame]) -> list[Message]:
    return [f.message for f in frames if isinstance(f, KnownFrame)]


Grades = dict[tuple[int | None, int | None], bool]
"""Each candidate's held-out verdict by (round, sample); a (None, None) key is never in it."""


def _grades(messages: list[Message], basis: Basis = "grade") -> Grades:
    if basis == "feedback":
        return {(v.round, v.sample): v.passed for v in messages if isinstance(v, Verification) and v.stage is None}
    return {(g.round, g.sample): g.passed for m in messages if isinstance(m, Grade) for g in m.grades}


def _by_round(messages: list[Message], grades: Grades) -> list[bool | None]:
    return [
        grades.get((d.best_round, d.best_sample))
        for d in messages
        if isinstance(d, Decision) and d.best_round is not None
    ]


def _behaviour(messages: list[Message], grades: Grades, into: Behaviour) -> None:
    decisions = [m for m in messages if isinstance(m, Decision)]
    for before, decision in itertools.pairwise(decisions):
        entering = grades.get((before.best_round, before.best_sample))
        produced = grades.get((decision.round, decision.round_best_sample))
        kept = grades.get((decision.best_round, decision.best_sample))
        if entering is None or produced is None or kept is None:
            continue
        change = refinement_change(entering, kept)
        into.fixed.setdefault(decision.round, Counts()).add(change == "fixed")
        into.broke.setdefault(decision.round, Counts()).add(change == "broken")
        if decision.rolled_back:
            into.rollbacks_saved.add(kept and not produced)
    for critique in (m for m in messages if isinstance(m, Critique) and m.error is None):
        graded = grades.get((critique.round, critique.sample))
        if graded is None:
            continue
        flagged = any(issue.severity in FLAGGING for issue in critique.issues)
        (into.false_alarms if graded else into.misses).add(flagged if graded else not flagged)
