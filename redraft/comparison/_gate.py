"""The regression gate (``redraft compare --baseline OLD/comparison.json --fail-if-worse``): each arm held against
the same arm of an earlier comparison, its verdict recorded in the new ``comparison.json`` (`Gate`).

An arm regressed when its pass rate fell by more than its interval allows: the earlier rate lies above the new
rate's 95 % interval. A difference inside the noise is not a regression. The gate reads only what `Earlier`
names of the earlier file (each arm's name and rate, the basis, and where it records them the tasks and the
seed), so a comparison.json whose other figures are laid out otherwise still serves; and it warns when the
earlier comparison ran other tasks (their count or their ids) or another seed, since a difference may then be
the tasks', not the arms'.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from typing import Literal

import msgspec

from redraft.comparison._lane_figures import Basis
from redraft.errors import UserError

GateVerdict = Literal["regressed", "no_regression"]


class EarlierArm(msgspec.Struct):
    name: str
    pass_rate: float | None
    """On the earlier comparison's basis; None (JSON null) when the arm had no task to rate."""


class EarlierJudge(msgspec.Struct):
    judge: str
    rubric: str = ""


class Earlier(msgspec.Struct):
    """What the gate holds a new comparison against: the arms of an earlier ``comparison.json``."""

    arms: list[EarlierArm]
    basis: Basis = "grade"
    """What its pass rates rest on (files written before comparisons could rest on the feedback: the grade)."""
    tasks: int | None = None
    task_digest: str | None = None
    """`task_digest` of the tasks it compared (None: written before comparisons recorded it)."""
    seed: int | None = None
    judge: EarlierJudge | None = None
    """Who graded it, when a judge did (``--judge``)."""


class ArmDelta(msgspec.Struct, frozen=True, kw_only=True):
    """One arm against the same arm of the earlier comparison."""

    name: str
    before: float | None
    """The earlier rate; None when the earlier comparison had no such arm, or nothing to rate it on."""
    after: float
    low: float
    high: float
    """The new rate's 95 % interval."""
    delta: float | None
    """``after - before``."""
    regressed: bool
    """``before`` lies above the new interval: worse by more than the noise allows."""


class Gate(msgspec.Struct, frozen=True, kw_only=True):
    """The gate's verdict, as comparison.json records it."""

    baseline: str
    """The earlier comparison.json, as it was named (``--baseline``)."""
    basis: Basis
    verdict: GateVerdict
    arms: list[ArmDelta]
    warnings: list[str] = []
    """Why the two comparisons may not be alike: other tasks, another seed, or records too old to tell."""


def task_digest(task_ids: Iterable[str]) -> str:
    """A short digest of a set of task ids: equal for the same tasks, whatever their order."""
    return hashlib.sha256("\n".join(sorted(set(task_ids))).encode()).hexdigest()[:16]


def gate(arms: Iterable[tuple[str, float, float, float]], basis: Basis, seen: Earlier, baseline: str) -> Gate:
    """Each new arm (name, rate, interval's low and high, on ``basis``) against ``seen``; `UserError` when their
    rates rest on different bases, which cannot be held against each other."""
    if basis != seen.basis:
        raise UserError(
            f"the earlier comparison's pass rates rest on the {seen.basis}, this one's on the {basis}: "
            "they cannot be held against each other"
        )
    before = {arm.name: arm.pass_rate for arm in seen.arms}
    deltas = []
    for name, rate, low, high in arms:
        was = before.get(name)
        regressed = was is not None and math.isfinite(high) and was > high
        delta = None if was is None else rate - was
        deltas.append(ArmDelta(name=name, before=was, after=rate, low=low, high=high, delta=delta, regressed=regressed))
    verdict: GateVerdict = "regressed" if any(d.regressed for d in deltas) else "no_regression"
    return Gate(baseline=baseline, basis=basis, verdict=verdict, arms=deltas)


def differences(
    seen: Earlier, tasks: int, digest: str | None, seed: int | None, judge: tuple[str, str] | None = None
) -> list[str]:
    """A warning for each way the earlier comparison's tasks, seed or judge (spec and rubric) differ from this
    one's."""
    same = "so a difference may be the tasks', not the arms'"
    if seen.task_digest is None and seen.seed is None:
        return [
            "the baseline comparison does not record its tasks' ids or its seed (an earlier redraft wrote it): "
            "the gate cannot check that it ran the same tasks"
        ]
    said = []
    if seen.tasks is not None and seen.tasks != tasks:
        said.append(f"the baseline comparison ran {seen.tasks:,} tasks, this one {tasks:,}: {same}")
    elif None not in (seen.task_digest, digest) and seen.task_digest != digest:
        said.append(f"the baseline comparison ran other tasks (as many, other ids): {same}")
    if None not in (seen.seed, seed) and seen.seed != seed:
        said.append(f"the baseline comparison used --seed {seen.seed}, this one --seed {seed}: {same}")
    before = None if seen.judge is None else (seen.judge.judge, seen.judge.rubric)
    if before != judge:
        said.append(
            f"the baseline comparison was graded by {_grader(before)}, this one by {_grader(judge)}: "
            "a difference may be the graders', not the arms'"
        )
    return said


def _grader(judge: tuple[str, str] | None) -> str:
    return "the scenario's grade" if judge is None else f"the judge {judge[0]} by the rubric {judge[1]!r}"


def regression_lines(found: Gate, rate_name: str) -> list[str]:
    """One line per regressed arm: its rate and interval, and how far below the earlier rate."""
    return [
        f"arm {d.name}: {rate_name} {d.after:.1%} (95% CI {d.low:.1%}-{d.high:.1%}) is worse than the baseline "
        f"comparison's {d.before:.1%} by {d.before - d.after:.1%}"
        for d in found.arms
        if d.regressed and d.before is not None
    ]
