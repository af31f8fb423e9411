"""A comparison's figures from its lanes' run directories, ``comparison.json``, and the regression gate.

`build` reads every lane (`redraft.comparison._lane_figures`) and computes every figure
(`redraft.comparison._analysis`); `write_json` writes ``comparison.json`` under the
comparison's ``--out``. `regressions` holds a comparison against an earlier one
(``--baseline OLD/comparison.json --fail-if-worse``): an arm regressed when its
graded pass rate fell by more than its interval allows (the old rate lies above
the new rate's 95 % interval); a difference inside the noise is not a regression.
The gate reads only each earlier arm's name and graded pass rate (`Earlier`), so
a comparison.json whose other figures are laid out otherwise still serves.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import msgspec

from redraft.comparison._analysis import (
    ArmFigures,
    Comparison,
    Curve,
    Difference,
    Match,
    against_baseline,
    arm_summary,
    between,
    curve,
    per_task_pass,
)
from redraft.comparison._lane_figures import Basis, Behaviour, Counts, TaskFigures, arm_figures, baseline_samples
from redraft.comparison._runner import BASELINE, ComparePlan
from redraft.errors import UserError
from redraft.protocols.bounds import MAX_FRAME_BYTES, bounded
from redraft.rundir.reader import RunReader

COMPARISON = "comparison.json"


def build(plan: ComparePlan, match: Match) -> Comparison:
    """Every figure of a finished comparison, from its lanes' run directories."""
    repeats: dict[str, list[list[TaskFigures]]] = {}
    behaviours: dict[str, Behaviour] = {}
    oracles = {lane.arm: lane.config.experiment.oracle_feedback for lane in plan.lanes()}
    basis = _basis(plan)
    for lane in plan.lanes():
        if lane.arm == BASELINE:
            continue
        tasks, behaviour = arm_figures(plan.out / lane.label, basis)
        repeats.setdefault(lane.arm, []).append(tasks)
        behaviours[lane.arm] = _merged(behaviours.get(lane.arm), behaviour)
    samples = baseline_samples(plan.out / BASELINE, basis)
    cost = _cost_per_sample(plan.out / BASELINE, plan.baseline_samples)
    curves = [curve(name, samples, cost) for name in ("best_of_n", "self_consistency")]
    arms = [arm_summary(name, runs, behaviours[name], oracle=oracles[name]) for name, runs in repeats.items()]
    per_task = {name: per_task_pass(runs) for name, runs in repeats.items()}
    vs_baselines = [against_baseline(a, per_task[a.name], c, samples, match) for a in arms for c in curves]
    vs_arms = [between(a.name, per_task[a.name], b.name, per_task[b.name]) for a, b in itertools.combinations(arms, 2)]
    return Comparison(
        scenario=plan.base.experiment.scenario,
        match=match,
        tasks=max((a.tasks + a.ungraded for a in arms), default=0),
        arms=arms,
        baselines=curves,
        against_baselines=vs_baselines,
        between_arms=vs_arms,
        notes=_basis_notes(basis) + _oracle_notes(arms, oracles[BASELINE]) + _notes(vs_baselines, curves),
        basis=basis,
    )


def _basis(plan: ComparePlan) -> Basis:
    """The held-out grade, when any lane's task has one; else the feedback (nothing was held out)."""
    for lane in plan.lanes():
        if any(entry.result.graded_pass is not None for entry in RunReader(plan.out / lane.label).entries()):
            return "grade"
    return "feedback"


def _basis_notes(basis: Basis) -> list[str]:
    if basis == "grade":
        return []
    return [
        "no task had a held-out grade: every pass rate, baseline and interval here is the feedback's, what the "
        "loop optimised, not a held-out result (name a grade with --grade to compare on one)"
    ]


def _merged(into: Behaviour | None, more: Behaviour) -> Behaviour:
    if into is None:
        return more
    for mine, theirs in ((into.fixed, more.fixed), (into.broke, more.broke)):
        for round_, counts in theirs.items():
            _add(mine.setdefault(round_, Counts()), counts)
    for a, b in (
        (into.false_alarms, more.false_alarms),
        (into.misses, more.misses),
        (into.rollbacks_saved, more.rollbacks_saved),
    ):
        _add(a, b)
    return into


def _add(into: Counts, more: Counts) -> None:
    into.hits += more.hits
    into.total += more.total


def _cost_per_sample(root: Path, samples: int) -> tuple[float, float, float]:
    """Mean (calls, tokens, USD) of one baseline sample: a task's usage over its samples."""
    results = [entry.result for entry in RunReader(root).entries()]
    if not results:
        return (1.0, 0.0, 0.0)
    n = len(results) * samples
    return (
        sum(r.usage.calls for r in results) / n,
        sum(r.usage.total_tokens for r in results) / n,
        sum(r.usage.cost_usd for r in results) / n,
    )


def _notes(vs_baselines: list[Difference], curves: list[Curve]) -> list[str]:
    notes = []
    ceiling = curves[0].samples if curves else 0
    for difference in vs_baselines:
        if difference.budget is not None and math.isfinite(difference.budget) and difference.budget > ceiling:
            notes.append(
                f"{difference.a} spent {difference.budget:.1f} samples' worth per task, more than the baseline's "
                f"{ceiling}: its baselines are held at {ceiling} (rerun with a larger --baseline-samples)"
            )
    noisy = [d for d in vs_baselines if not d.significant]
    if noisy:
        pairs = ", ".join(f"{d.a} vs {d.b}" for d in noisy)
        notes.append(f"within noise (p >= 0.05, and the 95% interval of the difference holds 0): {pairs}")
    return list(dict.fromkeys(notes))


def _oracle_notes(arms: list[ArmFigures], baseline_oracle: bool) -> list[str]:
    """What was fed the held-out grade: upper bounds, not results."""
    notes = []
    fed = [a.name for a in arms if a.oracle]
    if fed:
        notes.append(
            f"oracle (fed the held-out grade as feedback; an upper bound, not a result, and left off the Pareto "
            f"front): {', '.join(fed)}"
        )
    if baseline_oracle:
        notes.append("the sampling baseline was fed the held-out grade too (--oracle-feedback): its curves are oracle")
    return notes


def write_json(comparison: Comparison, out: Path) -> Path:
    path = out / COMPARISON
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(msgspec.json.format(msgspec.json.encode(comparison), indent=2) + b"\n")
    return path


class EarlierArm(msgspec.Struct):
    name: str
    pass_rate: float | None
    """Graded; None (JSON null) when the arm had no graded task."""


class Earlier(msgspec.Struct):
    """What the gate holds a new comparison against: the arms of an earlier ``comparison.json``."""

    arms: list[EarlierArm]
    basis: Basis = "grade"
    """What its pass rates rest on (files written before comparisons could rest on the feedback: the grade)."""


_EARLIER = msgspec.json.Decoder(Earlier)


def read_json(path: Path) -> Earlier:
    """An earlier comparison's arms; `UserError` if the file is missing or not a comparison."""
    try:
        return bounded(_EARLIER.decode, path.read_bytes(), what=str(path), max_bytes=MAX_FRAME_BYTES)
    except FileNotFoundError:
        raise UserError(f"baseline comparison not found: {path}") from None
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise UserError(f"{path} is not a comparison.json: {exc}") from None


def regressions(new: Comparison, old: Earlier) -> list[str]:
    """One line per arm of ``new`` whose graded pass rate fell below ``old``'s by more than its interval allows."""
    if new.basis != old.basis:
        raise UserError(
            f"the earlier comparison's pass rates rest on the {old.basis}, this one's on the {new.basis}: "
            "they cannot be held against each other"
        )
    before = {arm.name: arm for arm in old.arms}
    lines = []
    for arm in new.arms:
        was = before.get(arm.name)
        if was is None or was.pass_rate is None or not math.isfinite(arm.ci.high):
            continue
        if was.pass_rate > arm.ci.high:
            lines.append(
                f"arm {arm.name}: {new.rate_name} {arm.pass_rate:.1%} (95% CI {arm.ci.low:.1%}-{arm.ci.high:.1%}) "
                f"is worse than the baseline comparison's {was.pass_rate:.1%} by {was.pass_rate - arm.pass_rate:.1%}"
            )
    return lines
