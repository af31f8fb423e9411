"""From the lanes' run directories to ``comparison.json``: every figure of the comparison, typed.

Per arm (repeats pooled: a task's figure is its mean over repeats, and tasks are
the unit every interval counts): the graded pass rate with its 95 % interval,
cost per task and in all, the pass rate after each round, and what revisions,
critiques and rollbacks did (`redraft.comparison._lane_figures`).

The baselines are curves: best-of-n and self-consistency at every n up to the
baseline's N, computed from its samples (`redraft.stats`). Each arm is
matched to them at its own mean cost per task (``--match``: model calls,
tokens, or USD), and compared task by task with the baseline's expected pass at
that budget. Arms are compared with each other the same way. Each difference is
decided by one paired test (`redraft.stats.paired`): the exact McNemar
test when both sides have one pass or fail per task, the paired t-test when
either side's figures are means; its p value, its 95 % interval and whether it
is significant all come from that test, so they cannot disagree.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Literal

import msgspec

from redraft.comparison._gate import Gate
from redraft.comparison._human import HumanJudgements
from redraft.comparison._interval import Interval
from redraft.comparison._judged import JudgeNote
from redraft.comparison._lane_figures import Basis, Behaviour, TaskFigures
from redraft.protocols.messages import Usage
from redraft.rundir import refinement_change
from redraft.stats import (
    Method,
    Paired,
    Sample,
    Selector,
    at_budget,
    best_of_n,
    majority_vote,
    paired,
    wilson,
)

Match = Literal["calls", "tokens", "usd"]
BASELINES: dict[str, Selector] = {"best_of_n": best_of_n, "self_consistency": majority_vote}


class Difference(msgspec.Struct, frozen=True, kw_only=True):
    """``a`` minus ``b`` over the same tasks, decided by one paired test."""

    a: str
    b: str
    mean: float
    ci: Interval
    """The test's own 95 % interval: it excludes 0 exactly when the difference is significant."""
    test: Method
    """``exact_mcnemar`` (one pass or fail per task on both sides) or ``paired_t`` (means)."""
    p: float | None
    """The test's two-sided p value; None when it has nothing to go on (see `redraft.stats`)."""
    significant: bool
    """p < 0.05."""
    budget: float | None = None
    """Against a baseline: the samples per task it was matched at."""

    @classmethod
    def of(cls, a: str, b: str, result: Paired, budget: float | None = None) -> Difference:
        """The difference as comparison.json keeps it, from the test that decided it."""
        return cls(
            a=a,
            b=b,
            mean=result.mean,
            ci=Interval(result.low, result.high),
            test=result.method,
            p=result.p,
            significant=result.significant,
            budget=budget,
        )


class PairwiseFigures(msgspec.Struct, frozen=True, kw_only=True):
    """Two arms' final answers, judged against each other task by task."""

    a: str
    b: str
    pairs: int
    """Tasks both arms answered."""
    a_wins: int
    b_wins: int
    ties: int
    """The judge's ties, its flips and its invalid replies together: no win for either."""
    flips: int
    """Of the ties: verdicts that named a different answer when the order was swapped."""
    invalid: int
    """Of the ties: a reply in one of the orders that was no verdict."""
    difference: Difference
    """a's share of wins less b's, by the exact test over the tasks."""
    usage: Usage = Usage()
    """What the judge's pairwise calls spent, priced by the comparison's price table (the comparison's grading
    cost, apart from the arms')."""
    unpriced: list[str] = []
    """The judge's models the price table does not know: their calls are counted at 0 USD."""

    def said(self) -> str:
        """The figures in one line, for the terminal's notes."""
        d = self.difference
        return (
            f"pairwise: {self.a} vs {self.b} over {self.pairs} tasks: {self.a} better on {self.a_wins}, {self.b} on "
            f"{self.b_wins}, {self.ties} tied ({self.flips} of them verdicts that flipped with the order); difference "
            f"{d.mean:+.1%} (95% CI {d.ci.low:+.1%} to {d.ci.high:+.1%}), p = {'n/a' if d.p is None else f'{d.p:.2g}'}"
        )


class ArmFigures(msgspec.Struct, kw_only=True):
    name: str
    oracle: bool
    """The loop was fed the held-out grade (``oracle_feedback``): an upper bound, not a result. Marked wherever
    the arm is shown, and never on the Pareto front."""
    repeats: int
    tasks: int
    """Tasks with a grade (the others are left out of graded figures)."""
    ungraded: int
    pass_rate: float
    """Graded, held out."""
    ci: Interval
    feedback_pass_rate: float
    """What the loop itself believed: its feedback's pass rate."""
    initial_pass_rate: float
    mean_calls: float
    mean_tokens: float
    mean_usd: float
    total_calls: int
    total_tokens: int
    total_usd: float
    wall_s: float
    pass_rate_by_round: list[float]
    fixed_by_round: dict[str, float | None]
    """By round: the share of that round's revisions after which the kept best answer passed where the best
    entering the round failed (a share of revisions, not of tasks; judged by the comparison's ``basis``). A
    passing revision the arbiter did not keep fixed nothing."""
    broken_by_round: dict[str, float | None]
    """By round: the share of that round's revisions after which the kept best answer failed where the best
    entering the round passed (a rollback keeps the passing best: no break). Over a task's rounds, its fixes less
    its breaks are its change from round 0 to the final answer (``fixed_tasks``, ``broken_tasks``)."""
    false_alarm_rate: float | None
    miss_rate: float | None
    rollback_saved_rate: float | None
    rollbacks: int
    fixed_tasks: int = 0
    """Tasks (over repeats) whose round-0 best failed and whose final answer passed: the end table's "fixed"
    (`redraft.rundir.refinement_change`, the one definition)."""
    broken_tasks: int = 0
    """Tasks (over repeats) whose round-0 best passed and whose final answer failed: the end table's "broken"."""
    compared_cost: dict[str, float] | None = None
    """Mean calls, tokens and usd per task over the tasks it is compared on (graded; an errored task spent
    little and is not compared): what its baselines are matched at. None in comparisons written before it."""
    grade_errors: dict[str, int] = {}
    """Tasks (over repeats) whose grade could not be made, counted by cause: graded as failed, so in ``tasks``."""


class Curve(msgspec.Struct, kw_only=True):
    name: str
    samples: int
    """N: the baseline's samples per task."""
    pass_rate: list[float]
    """At n = 1 .. N samples per task."""
    mean_calls_per_sample: float
    mean_tokens_per_sample: float
    mean_usd_per_sample: float
    tasks: int = 0
    """Tasks its pass rates are over (those with samples graded; 0 in comparisons written before it)."""
    ci: list[Interval] = []
    """The 95 % interval of each pass rate, Wilson's over the tasks as an arm's (empty in comparisons written
    before it)."""
    total_usd: float = 0.0
    """What the baseline's lane spent in all, its method's own spend (the same for every curve of one lane)."""


class Comparison(msgspec.Struct, kw_only=True):
    scenario: str
    match: Match
    tasks: int
    arms: list[ArmFigures]
    baselines: list[Curve]
    against_baselines: list[Difference]
    between_arms: list[Difference]
    notes: list[str] = []
    basis: Basis = "grade"
    """What every pass rate rests on: the held-out grade, or the feedback when nothing was held out (a user's
    check without a grade): then they are what the loop optimised, and every view names them so."""
    seed: int | None = None
    """The run's ``--seed`` (None in comparisons written before it): a gate warns when its baseline's differs."""
    task_digest: str | None = None
    """A digest of the compared tasks' ids (`redraft.comparison._gate.task_digest`), for the same warning."""
    gate: Gate | None = None
    """The regression gate's verdict against ``--baseline`` (None: no baseline was given)."""
    judge: JudgeNote | None = None
    """Who graded every lane when a judge did (``--judge``), and its card (None: the scenario's grade)."""
    pairwise: list[PairwiseFigures] = []
    """Each pair of arms' final answers judged against each other (``--pairwise``; `redraft.comparison._pairwise`)."""
    human: HumanJudgements | None = None
    """People's labels of the arms' answers and their preferences between arms (`redraft.comparison._human`;
    None: nobody has judged them)."""
    grading: Usage = Usage()
    """What grading spent: the judge's grades of every lane's tasks, and its pairwise judgments, priced. Apart
    from every arm's and baseline's cost, which it never enters: each is matched on its method's own spend."""

    def grading_said(self) -> str | None:
        """The comparison's grading cost in one line (None when it spent nothing)."""
        if not self.grading.calls:
            return None
        unpriced = sorted({m for figures in self.pairwise for m in figures.unpriced})
        unknown = f" (unpriced: {', '.join(unpriced)})" if unpriced else ""
        paired = sum((figures.usage for figures in self.pairwise), Usage())
        pairs = f", {paired.calls} of them the pairwise judgments (${paired.cost_usd:.4f})" if paired.calls else ""
        return (
            f"grading: the judge cost ${self.grading.cost_usd:.4f}{unknown} over {self.grading.calls} calls{pairs}, "
            "apart from the arms' and baselines' costs (each is its method's own spend)"
        )

    @property
    def rate_name(self) -> str:
        """The pass rate every figure shows, in words: ``graded pass rate`` (``judged pass rate``) or ``feedback
        pass rate``."""
        if self.basis != "grade":
            return "feedback pass rate"
        return "judged pass rate" if self.judge is not None else "graded pass rate"

    @property
    def rate_source(self) -> str:
        """Where that rate comes from, in words."""
        if self.basis != "grade":
            return "no held-out grade"
        if self.judge is None:
            return "held out"
        judge = self.judge
        self_judged = ", SELF-JUDGED" if judge.self_judged else ""
        card = {None: "no card", True: "its card passed", False: "its card did not pass"}[judge.card_passed]
        return f"held out, judged by {judge.judge} by {judge.rubric!r}{self_judged}; {card}"


def arm_summary(name: str, repeats: list[list[TaskFigures]], behaviour: Behaviour, *, oracle: bool) -> ArmFigures:
    """One arm's figures from its repeats (each a list of task figures, in any order); ``oracle``: fed the grade."""
    per_task = _pooled(repeats)
    graded = [v for v in per_task.values() if v is not None]
    every = [t for run in repeats for t in run]
    count = max(len(every), 1)
    compared = [t for t in every if t.graded_pass is not None] or every
    return ArmFigures(
        name=name,
        oracle=oracle,
        repeats=len(repeats),
        tasks=len(graded),
        ungraded=len(per_task) - len(graded),
        pass_rate=_mean(graded),
        ci=Interval(*wilson(math.fsum(graded), len(graded))),
        feedback_pass_rate=sum(t.passed for t in every) / count,
        initial_pass_rate=_mean([float(t.initial_graded_pass) for t in every if t.initial_graded_pass is not None]),
        mean_calls=sum(t.calls for t in every) / count,
        mean_tokens=sum(t.tokens for t in every) / count,
        mean_usd=sum(t.usd for t in every) / count,
        total_calls=sum(t.calls for t in every),
        total_tokens=sum(t.tokens for t in every),
        total_usd=sum(t.usd for t in every),
        wall_s=sum(t.wall_s for t in every),
        pass_rate_by_round=_by_round(every),
        fixed_by_round={str(r): c.rate for r, c in sorted(behaviour.fixed.items())},
        broken_by_round={str(r): c.rate for r, c in sorted(behaviour.broke.items())},
        false_alarm_rate=behaviour.false_alarms.rate,
        miss_rate=behaviour.misses.rate,
        rollback_saved_rate=behaviour.rollbacks_saved.rate,
        rollbacks=behaviour.rollbacks_saved.total,
        fixed_tasks=sum(refinement_change(t.initial_graded_pass, t.graded_pass) == "fixed" for t in every),
        broken_tasks=sum(refinement_change(t.initial_graded_pass, t.graded_pass) == "broken" for t in every),
        compared_cost={
            "calls": _mean([float(t.calls) for t in compared]),
            "tokens": _mean([float(t.tokens) for t in compared]),
            "usd": _mean([t.usd for t in compared]),
        },
        grade_errors=dict(Counter(t.grade_error for t in every if t.grade_error is not None)),
    )


def per_task_pass(repeats: list[list[TaskFigures]]) -> dict[str, float | None]:
    """Each task's graded pass, averaged over repeats (None: never graded)."""
    return _pooled(repeats)


def _pooled(repeats: list[list[TaskFigures]]) -> dict[str, float | None]:
    values: dict[str, list[float]] = defaultdict(list)
    seen: set[str] = set()
    for run in repeats:
        for task in run:
            seen.add(task.task_id)
            if task.graded_pass is not None:
                values[task.task_id].append(float(task.graded_pass))
    return {task: (_mean(values[task]) if values[task] else None) for task in sorted(seen)}


def _by_round(tasks: Sequence[TaskFigures]) -> list[float]:
    """Graded pass rate of the best so far after each round; a task that stopped keeps its last state."""
    depth = max((len(t.by_round) for t in tasks), default=0)
    rates = []
    for r in range(depth):
        states = [t.by_round[min(r, len(t.by_round) - 1)] for t in tasks if t.by_round]
        known = [float(s) for s in states if s is not None]
        rates.append(_mean(known))
    return rates


def curve(
    name: str, samples: dict[str, list[Sample]], cost_per_sample: tuple[float, float, float], total_usd: float = 0.0
) -> Curve:
    """A baseline's graded pass rate at every n up to its N, averaged over tasks, each with its interval;
    ``total_usd``: what its lane spent in all."""
    select = BASELINES[name]
    size = min((len(s) for s in samples.values()), default=0)
    by_n = [[select(s, n) for s in samples.values()] for n in range(1, size + 1)]
    calls, tokens, usd = cost_per_sample
    return Curve(
        name=name,
        samples=size,
        pass_rate=[_mean(values) for values in by_n],
        mean_calls_per_sample=calls,
        mean_tokens_per_sample=tokens,
        mean_usd_per_sample=usd,
        tasks=len(samples),
        ci=[Interval(*wilson(math.fsum(values), len(values))) for values in by_n],
        total_usd=total_usd,
    )


def matched_budget(arm: ArmFigures, baseline: Curve, match: Match) -> float:
    """Samples per task the baseline gets for the arm's mean cost per task over the tasks compared."""
    every = {"calls": arm.mean_calls, "tokens": arm.mean_tokens, "usd": arm.mean_usd}
    unit = {
        "calls": baseline.mean_calls_per_sample,
        "tokens": baseline.mean_tokens_per_sample,
        "usd": baseline.mean_usd_per_sample,
    }[match]
    spent = (arm.compared_cost or every)[match]
    return spent / unit if unit > 0 else math.nan


def against_baseline(
    arm: ArmFigures, arm_tasks: dict[str, float | None], baseline: Curve, samples: dict[str, list[Sample]], match: Match
) -> Difference:
    """The arm against a baseline's expected pass at the arm's own cost, task by task."""
    budget = matched_budget(arm, baseline, match)
    if not math.isfinite(budget):  # the baseline's samples cost nothing in this unit: nothing to match
        return Difference.of(arm.name, baseline.name, Paired("paired_t", math.nan, math.nan, math.nan, None), budget)
    select = BASELINES[baseline.name]
    tasks = [t for t, v in arm_tasks.items() if v is not None and t in samples]
    ours = [float(arm_tasks[t] or 0.0) for t in tasks]
    theirs = [at_budget(select, samples[t], budget) for t in tasks]
    return Difference.of(arm.name, baseline.name, paired(ours, theirs), budget)


def between(a: str, ours: dict[str, float | None], b: str, theirs: dict[str, float | None]) -> Difference:
    """Two arms over the tasks both graded."""
    tasks = [t for t in ours if ours[t] is not None and theirs.get(t) is not None]
    xs, ys = [float(ours[t] or 0.0) for t in tasks], [float(theirs[t] or 0.0) for t in tasks]
    return Difference.of(a, b, paired(xs, ys))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan
