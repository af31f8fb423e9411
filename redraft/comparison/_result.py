"""A comparison's figures from its lanes' run directories, ``comparison.json``, and the regression gate.

`build` reads every lane (`redraft.comparison._lane_figures`) and computes every figure
(`redraft.comparison._analysis`); `write_json` writes ``comparison.json`` under the
comparison's ``--out``. `held_against` holds a comparison against an earlier one
(``--baseline OLD/comparison.json --fail-if-worse``) by the gate's rule
(`redraft.comparison._gate`), whose verdict the new comparison.json records.
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
from redraft.comparison._gate import Earlier, Gate, differences, gate, regression_lines, task_digest
from redraft.comparison._judged import Judged, judge_note
from redraft.comparison._lane_figures import (
    Basis,
    Behaviour,
    Counts,
    TaskFigures,
    arm_figures,
    baseline_samples,
    method_usage,
)
from redraft.comparison._runner import BASELINE, ComparePlan
from redraft.errors import UserError
from redraft.protocols.bounds import MAX_FRAME_BYTES, bounded
from redraft.rundir.reader import RunReader

COMPARISON = "comparison.json"


def build(plan: ComparePlan, match: Match, judged: Judged | None = None) -> Comparison:
    """Every figure of a finished comparison, from its lanes' run directories; ``judged``: the judge every lane
    was graded by, with the card given for it and its path."""
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
    cost, spent = _baseline_cost(plan.out / BASELINE, plan.baseline_samples)
    curves = [curve(name, samples, cost, spent) for name in ("best_of_n", "self_consistency")]
    arms = [arm_summary(name, runs, behaviours[name], oracle=oracles[name]) for name, runs in repeats.items()]
    per_task = {name: per_task_pass(runs) for name, runs in repeats.items()}
    vs_baselines = [against_baseline(a, per_task[a.name], c, samples, match) for a in arms for c in curves]
    vs_arms = [between(a.name, per_task[a.name], b.name, per_task[b.name]) for a, b in itertools.combinations(arms, 2)]
    return Comparison(
        scenario=plan.base.experiment.scenario,
        match=match,
        tasks=max((a.tasks + a.ungraded for a in arms), default=0),
        seed=plan.base.experiment.seed,
        task_digest=task_digest(t for figures in per_task.values() for t in figures),
        arms=arms,
        baselines=curves,
        against_baselines=vs_baselines,
        between_arms=vs_arms,
        notes=_basis_notes(basis)
        + _oracle_notes(arms, oracles[BASELINE])
        + _notes(vs_baselines, curves)
        + _grade_error_notes(arms),
        basis=basis,
        judge=None if judged is None else judge_note(*judged, [plan.out / lane.label for lane in plan.lanes()]),
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


def _baseline_cost(root: Path, samples: int) -> tuple[tuple[float, float, float], float]:
    """Mean (calls, tokens, USD) of one baseline sample (a task's usage over its samples), and the lane's USD in
    all."""
    results = [entry.result for entry in RunReader(root).entries()]
    if not results:
        return (1.0, 0.0, 0.0), 0.0
    n = len(results) * samples
    spent = [method_usage(r) for r in results]
    usd = math.fsum(u.cost_usd for u in spent)
    return (sum(u.calls for u in spent) / n, sum(u.total_tokens for u in spent) / n, usd / n), usd


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


def _grade_error_notes(arms: list[ArmFigures]) -> list[str]:
    """Each arm whose tasks' grades could not all be made: graded as failed, and said why."""
    return [
        f"{arm.name}: {sum(arm.grade_errors.values())} task(s) graded as failed because their grade could not be "
        f"made ({', '.join(f'{cause} {n}' for cause, n in sorted(arm.grade_errors.items()))})"
        for arm in arms
        if arm.grade_errors
    ]


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
    """One line per arm of ``new`` whose pass rate fell below ``old``'s by more than its interval allows."""
    return regression_lines(held_against(new, old, ""), new.rate_name)


def held_against(new: Comparison, old: Earlier, baseline: str) -> Gate:
    """The gate's verdict on ``new`` against ``old`` (the comparison.json named ``baseline``), with a warning for
    each way their tasks or seeds differ."""
    found = gate(((a.name, a.pass_rate, a.ci.low, a.ci.high) for a in new.arms), new.basis, old, baseline)
    judge = None if new.judge is None else (new.judge.judge, new.judge.rubric)
    warned = differences(old, new.tasks, new.task_digest, new.seed, judge)
    return msgspec.structs.replace(found, warnings=warned)
