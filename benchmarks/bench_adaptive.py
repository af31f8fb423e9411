"""The adaptive strategy against fixed allocations of the same calls and against best-of-N, on a simulated model.

Each task family has a known chance that a fresh sample is right, that a revision
with the verifier's feedback fixes a wrong best, and that one also carrying a
critique does, and a kind of feedback (a localized failure, a score only, or no
signal at all: then the check cannot tell answers apart and the pick is the
majority's). A mix is a share of tasks per family. Every policy runs through the
real engine in this process (arbiter, task loops, roles, the batch's ledger and
its bank of calls) with the same budget of model calls per task on average
(``--calls-per-task``); only the rule that allocates the calls differs:

- ``adaptive``: the strategy as shipped (Thompson sampling on what the batch learns);
- ``fixed:<action>``: every later-round call the same action (fresh, revise,
  critique), or alternating fresh and revise (``fixed:split``): the best of these
  per mix is the allocation a user who knew the mix in advance would have chosen;
- ``best_of_n``: N = the budget, all in one round, picked by the feedback then by
  agreement (the baseline every strategy is compared with).

The cost of deciding is measured last: seconds per model call of ``adaptive``
(Thompson draws, the shared ledger, the bank) against ``adversarial`` on the same
tasks with a zero-latency model in this process, in alternating turns, so the
engine's own cost is all there is to see; the ratio is printed (target: about 1).

The mixes: a grid of homogeneous batches, every pair of a fresh sample's and a
revision's chance in {5, 20, 50} %; the issue's mixed batch (half the tasks fixed
only by a revision, half only by a fresh sample right one time in two, whose failing
revisions hand the best back word for word); and five mixes of families.

A task's pass is its graded pass (the simulated gold), so a policy that stops on a
wrong majority is charged for it. Printed per mix, one table row: adaptive's pass
rate and calls, the best fixed allocation's, adaptive's ratio to it (target: at
least 0.95), best-of-N's pass rate at the same calls and adaptive's difference from
it in points (target: not below -1), and self-consistency's; ``--verbose`` adds
every policy's figures.

Escalation (``--escalate``), measured in the same run: batches where none, a fifth or
two fifths of the tasks are solved only by a stronger model 15 times the drafter's
price (the drafter's actions never fix them; the stronger model is right 0.8 a call on
any task), the rest solvable by the drafter (a fresh sample right 30 %, a revision
50 %). At the same budget in USD per task (``--usd-budget``, in the drafter's fresh
samples): adaptive with escalation, adaptive without, best-of-N with the drafter's
model, and the stronger model alone, sampling until it passes (its cost to reach its
pass rate) and to the same budget. Each row: pass rate, USD per task, cost over the
budget and over the stronger model alone, the pass rate's difference from it, and the
calls per task by action and kind of task (where the calls went). The criterion,
where a fifth of the tasks need the stronger model: with escalation, within 5 points
of its pass rate alone at no more than half its cost.

Run: `.venv/bin/python benchmarks/bench_adaptive.py` (``--tasks``, ``--budget``, ``--samples``;
``--only escalation``, ``--escalation-tasks``, ``--usd-budget``).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from redraft.backends.base import ChatRequest
from redraft.backends.pricing import Price, PriceTable, default_prices
from redraft.backends.scripted import ScriptedSpec
from redraft.engine._refine import local_roles
from redraft.engine.arbiter import Arbiter, ArbiterSettings
from redraft.engine.resolution import Cast, RoleSetup
from redraft.protocols.convergence import ConvergenceConfig
from redraft.protocols.messages import Action, CheckResult, DraftRequest, FeedbackState, Message, Result, Task
from redraft.scenarios import scenario
from redraft.strategies import Escalation, RoundContext, Share, get_strategy, strategy
from redraft.strategies._adaptive import Adaptive, _Memo
from tests.support.simulated import SimulatedAnswers

Feedback = Literal["localized", "score", "none"]


@dataclass(frozen=True)
class Family:
    fresh: float
    """Chance a fresh sample is right."""
    fix: float
    """Chance a revision with the feedback is right (the best so far being wrong)."""
    critiqued: float
    """Chance a revision that also carries a critique is right."""
    feedback: Feedback
    echo: bool = False
    """A failing revision hands back the best answer word for word (a model that does not act on the
    feedback), so it repeats an earlier leader; otherwise every wrong draft is worded anew."""
    strong: float = 0.8
    """Chance a call of the stronger model (``--escalate``) is right, a fresh sample or a revision alike."""


FAMILIES: dict[str, Family] = {
    "sampler": Family(fresh=0.30, fix=0.05, critiqued=0.05, feedback="localized"),
    "fixer": Family(fresh=0.05, fix=0.45, critiqued=0.45, feedback="localized"),
    "critiqued": Family(fresh=0.05, fix=0.05, critiqued=0.50, feedback="score"),
    "blind": Family(fresh=0.45, fix=0.30, critiqued=0.30, feedback="none"),
    "hard": Family(fresh=0.02, fix=0.03, critiqued=0.03, feedback="localized"),
    # the mixed batch: fixed only by a revision with the feedback, or only by a fresh sample
    "revisable": Family(fresh=0.0, fix=1.0, critiqued=1.0, feedback="localized"),
    "resamplable": Family(fresh=0.5, fix=0.0, critiqued=0.0, feedback="localized", echo=True),
    # escalation: tasks the drafter's model solves, and tasks only the stronger model does
    "solvable": Family(fresh=0.3, fix=0.5, critiqued=0.5, feedback="localized"),
    "strong_only": Family(fresh=0.0, fix=0.0, critiqued=0.0, feedback="localized"),
}
ODDS = (0.05, 0.2, 0.5)
"""The grid: every pair of a fresh sample's and a revision's chance (a critiqued revision's is a revision's)."""
FAMILIES |= {
    f"grid_{int(100 * f)}_{int(100 * r)}": Family(fresh=f, fix=r, critiqued=r, feedback="localized")
    for f in ODDS
    for r in ODDS
}
GRID: dict[str, dict[str, float]] = {
    f"fresh {f:.0%}, revise {r:.0%}": {f"grid_{int(100 * f)}_{int(100 * r)}": 1.0} for f in ODDS for r in ODDS
}
MIXES: dict[str, dict[str, float]] = {
    **GRID,
    "the issue's mix (revision-only and fresh-only tasks, half each)": {"revisable": 0.5, "resamplable": 0.5},
    "sampling pays": {"sampler": 0.8, "hard": 0.2},
    "revising pays": {"fixer": 0.8, "hard": 0.2},
    "a critique pays": {"critiqued": 0.8, "hard": 0.2},
    "no signal": {"blind": 1.0},
    "a bit of each": dict.fromkeys(["sampler", "fixer", "critiqued", "blind", "hard"], 0.2),
}
WRONG = ["11", "12", "13", "14", "15"]
"""A wrong draft's answer: one of a few, so wrong answers can agree with each other."""


def _family(text: str) -> Family:
    return FAMILIES[re.search(r"family=(\w+)", text)[1]]  # type: ignore[index]


def simulated_model(request: ChatRequest) -> str:
    """The drafter and the critic: right with the family's chance for what is asked, by the request's seed."""
    if request.json_schema is not None:  # the critic
        return '{"issues": [{"severity": "critical", "quote": "answer", "reason": "CRITIC", "fix": "redo it"}]}'
    prompt = request.messages[-1].content
    family = _family(prompt)
    rng = random.Random(request.seed)
    best = re.search(r"Your best answer so far.*?(answer \d+ \(draw \d+\))", prompt, re.S)
    chance = family.fresh if best is None else family.critiqued if "CRITIC" in prompt else family.fix
    if best is not None and family.echo and rng.random() >= chance:
        return best[1]
    answer = "42" if rng.random() < chance else rng.choice(WRONG)
    return f"answer {answer} (draw {rng.getrandbits(32)})"


def stronger_model(request: ChatRequest) -> str:
    """The stronger model: right with the family's ``strong`` chance, whatever it is asked."""
    rng = random.Random(request.seed)
    answer = "42" if rng.random() < _family(request.messages[-1].content).strong else rng.choice(WRONG)
    return f"answer {answer} (draw {rng.getrandbits(32)})"


@scenario("simulated")
class Simulated(SimulatedAnswers):
    """Tasks of the mix named by the run; right is '42'."""

    name = "simulated"

    def check(self, task: Task, text: str) -> list[CheckResult]:
        feedback = _family(task.prompt).feedback
        if feedback == "none":  # the check cannot tell: every answer looks alike to it
            return [CheckResult(name="format", passed=False, score=0.0)]
        if self.answer(text) == "42":
            return [CheckResult(name="example", passed=True, score=1.0, detail="every example passes")]
        detail = "example 3 fails: expected 42" if feedback == "localized" else ""
        return [CheckResult(name="example", passed=False, score=0.5, detail=detail)]


class Fixed(Adaptive):
    """Every later-round call the same action (``split``: fresh and revise in turn), to the same budget, spent
    to the end (no call is judged not worth making)."""

    action: Action | Literal["split"] = "fresh"
    worth: ClassVar[float] = 0.0

    def choose(self, ctx: RoundContext, memo: _Memo, state: FeedbackState) -> list[Action]:
        calls = memo.calls - (1 if self.action == "critique" else 0)
        slots = int(max(0.0, min(ctx.samples, calls)))
        if self.action == "split":
            return ["fresh" if (ctx.round + k) % 2 else "revise" for k in range(slots)]
        return [self.action] * slots or ["revise"]


for _action in ("fresh", "revise", "critique", "split"):
    strategy(f"fixed:{_action}")(type(f"Fixed_{_action}", (Fixed,), {"action": _action}))


def mix_tasks(mix: dict[str, float], count: int, seed: int) -> list[Task]:
    rng = random.Random(seed)
    names, weights = list(mix), list(mix.values())
    return [
        Task(task_id=f"t{i}", scenario="simulated", prompt=f"family={rng.choices(names, weights)[0]} task={i}")
        for i in range(count)
    ]


def run_policy(policy: str, tasks: list[Task], budget: int, samples: int, in_flight: int = 64) -> list[Result]:
    one_round = policy in ("best_of_n", "self_consistency")
    fixed_rounds = one_round or policy == "adversarial"  # spends --samples a round for --max-rounds
    rounds = 1 if one_round else budget if fixed_rounds else 4 * budget
    settings = ArbiterSettings(
        strategy=policy,
        samples=budget if one_round else samples,
        convergence=ConvergenceConfig(max_rounds=rounds, patience=rounds),
        share=None if fixed_rounds else Share(float(budget)),
        batch=f"bench-{policy}-{time.monotonic_ns()}",
    )
    model = ScriptedSpec(script=simulated_model)
    arbiter = Arbiter(
        local_roles(Cast.of(RoleSetup(scenario="simulated", drafter=model, critic=model), get_strategy(policy))),
        settings,
    )
    gate = asyncio.Semaphore(in_flight)

    async def one(task: Task) -> Result:
        async with gate:
            last = (await arbiter.run(task))[-1]
            assert isinstance(last, Result)
            return last

    async def every() -> list[Result]:
        return list(await asyncio.gather(*(one(t) for t in tasks)))

    return asyncio.run(every())


def figures(results: list[Result]) -> tuple[float, float]:
    """Graded pass rate (the answer is right) and mean calls per task."""
    passed = sum(r.answer == "42" for r in results) / len(results)
    return passed, sum(r.usage.calls for r in results) / len(results)


class Timed(Adaptive):
    """``adaptive`` with a stopwatch on its deciding: the choice of actions and every call of the ledger."""

    seconds: ClassVar[float] = 0.0

    def choose(self, ctx: RoundContext, memo: _Memo, state: FeedbackState) -> list[Action]:
        began = time.perf_counter()
        try:
            return super().choose(ctx, memo, state)
        finally:
            Timed.seconds += time.perf_counter() - began

    async def _call(self, ctx: RoundContext, method: str, *args: Any) -> Any:
        began = time.perf_counter()  # the ledger is an object of this process: no wait inside
        try:
            return await super()._call(ctx, method, *args)
        finally:
            Timed.seconds += time.perf_counter() - began


strategy("timed:adaptive")(Timed)


@dataclass(frozen=True)
class Overhead:
    per_call: float
    """adaptive's seconds per model call over adversarial's (medians over the turns)."""
    per_round: float
    """The same per round (a round of adaptive at K=1 makes one call, one of adversarial about two)."""
    deciding: float
    """The share of adaptive's run spent deciding (choosing, and the ledger)."""
    micros: float
    """Microseconds of deciding per round."""


def cost_of_deciding(tasks: list[Task], budget: int, turns: int) -> Overhead:
    """adaptive against adversarial on the same tasks at zero latency, one turn each, alternating."""
    per_call, per_round, share, micros = [], [], [], []
    for _ in range(turns):
        seconds, calls, rounds = {}, {}, {}
        for policy in ("adversarial", "timed:adaptive"):
            Timed.seconds = 0.0
            began = time.perf_counter()
            results = run_policy(policy, tasks, budget, samples=1)
            seconds[policy] = time.perf_counter() - began
            calls[policy] = sum(r.usage.calls for r in results)
            rounds[policy] = sum(r.rounds for r in results)
        a, b = "timed:adaptive", "adversarial"
        per_call.append((seconds[a] / calls[a]) / (seconds[b] / calls[b]))
        per_round.append((seconds[a] / rounds[a]) / (seconds[b] / rounds[b]))
        share.append(Timed.seconds / seconds[a])
        micros.append(1e6 * Timed.seconds / rounds[a])
    median = statistics.median
    return Overhead(median(per_call), median(per_round), median(share), median(micros))


POLICIES = ["adaptive", "fixed:fresh", "fixed:revise", "fixed:critique", "fixed:split", "best_of_n", "self_consistency"]


RATIO = 0.95
"""adaptive's pass rate at least this share of the best fixed allocation's, in every mix."""
BEHIND = 1.0
"""adaptive never more than this many points below best-of-N at the same calls, in any mix."""


@dataclass(frozen=True)
class Row:
    """One mix's figures: every policy's (pass rate, calls per task), and how adaptive fares."""

    mix: str
    rates: dict[str, tuple[float, float]]

    @property
    def best_fixed(self) -> str:
        return max((p for p in self.rates if p.startswith("fixed:")), key=lambda p: self.rates[p][0])

    @property
    def ratio(self) -> float:
        best = self.rates[self.best_fixed][0]
        return self.rates["adaptive"][0] / best if best else 1.0

    @property
    def behind(self) -> float:
        """Points adaptive is above (positive) or below best-of-N."""
        return 100 * (self.rates["adaptive"][0] - self.rates["best_of_n"][0])

    @property
    def ok(self) -> bool:
        return self.ratio >= RATIO and self.behind >= -BEHIND

    def line(self) -> str:
        (a, calls), best = self.rates["adaptive"], self.best_fixed
        return (
            f"| {self.mix} | {a:.1%} ({calls:.2f}) | {self.rates[best][0]:.1%} ({best[6:]}) | {self.ratio:.3f} "
            f"| {self.rates['best_of_n'][0]:.1%} | {self.behind:+.1f} | {self.rates['self_consistency'][0]:.1%} "
            f"| {'ok' if self.ok else 'MISSED'} |"
        )


# ------------------------------------------------------------------ escalation to a stronger model

CHEAP_USD = (0.15, 0.60)
"""The drafter's (and critic's) model: USD per million prompt and answer tokens (a token is a word here)."""
STRONG_USD = (2.25, 9.00)
"""The stronger model's: 15 times the drafter's, for prompt and answer tokens alike."""
PRICES = PriceTable(
    default_prices().prices
    | {
        "sim-cheap": Price(input=CHEAP_USD[0], output=CHEAP_USD[1]),
        "sim-strong": Price(input=STRONG_USD[0], output=STRONG_USD[1]),
    }
)
ESCALATION = Escalation(model="sim-strong", drafter_usd=CHEAP_USD, escalated_usd=STRONG_USD)
CHEAP = ScriptedSpec(script=simulated_model, model="sim-cheap")
STRONG = ScriptedSpec(script=stronger_model, model="sim-strong")
FRACTIONS = (0.0, 0.2, 0.4)
"""Shares of the batch's tasks that only the stronger model solves."""
STRONG_ROUNDS = 5
"""The stronger model alone samples one draft a round until it passes, at most this many rounds (99.97 %)."""
POINTS = 5.0
COST_SHARE = 0.5
"""The criterion: with escalation, within `POINTS` of the stronger model's pass rate alone, at no more than
`COST_SHARE` of its cost, where a fifth of the tasks need it."""


def escalation_tasks(fraction: float, count: int, seed: int) -> list[Task]:
    """``count`` tasks, exactly ``fraction`` of them solved only by the stronger model, in a shuffled order."""
    families = ["strong_only"] * round(fraction * count) + ["solvable"] * (count - round(fraction * count))
    random.Random(seed).shuffle(families)
    return [Task(task_id=f"t{i}", scenario="simulated", prompt=f"family={f} task={i}") for i, f in enumerate(families)]


@dataclass(frozen=True)
class Spent:
    """One policy's figures on one batch."""

    passed: float
    usd: float
    """Mean USD per task."""
    calls: dict[tuple[str, str], float]
    """Mean drafter calls per task of each family, by (family, action: fresh, revise, critique, escalate)."""


def run_money(
    policy: str,
    tasks: list[Task],
    usd: float | None,
    *,
    escalate: bool,
    drafter: ScriptedSpec,
    samples: int = 1,
    rounds: int = 60,
    in_flight: int = 64,
) -> Spent:
    """``policy`` on ``tasks`` with a budget of ``usd`` per task (None: none), the stronger model offered or not."""
    settings = ArbiterSettings(
        strategy=policy,
        samples=samples,
        convergence=ConvergenceConfig(max_rounds=rounds, patience=rounds),
        prices=PRICES,
        share=None if usd is None else Share(usd, "usd"),
        escalation=ESCALATION if escalate else None,
        batch=f"bench-{policy}-{time.monotonic_ns()}",
    )
    setup = RoleSetup(scenario="simulated", drafter=drafter, critic=CHEAP, escalate=STRONG if escalate else None)
    arbiter = Arbiter(local_roles(Cast.of(setup, get_strategy(policy))), settings)
    gate = asyncio.Semaphore(in_flight)

    async def one(task: Task) -> list[Message]:
        async with gate:
            return await arbiter.run(task)

    async def every() -> list[list[Message]]:
        return list(await asyncio.gather(*(one(t) for t in tasks)))

    traces = asyncio.run(every())
    results = [t[-1] for t in traces]
    assert all(isinstance(r, Result) for r in results)
    calls: Counter[tuple[str, str]] = Counter()
    for task, trace in zip(tasks, traces, strict=True):
        family = re.search(r"family=(\w+)", task.prompt)[1]  # type: ignore[index]
        for request in trace:
            if isinstance(request, DraftRequest):
                calls[(family, "fresh" if request.intent is None else request.intent.action)] += 1
    per_family = Counter(re.search(r"family=(\w+)", t.prompt)[1] for t in tasks)  # type: ignore[index]
    return Spent(
        passed=sum(r.answer == "42" for r in results) / len(results),  # type: ignore[union-attr]
        usd=sum(r.usage.cost_usd for r in results) / len(results),  # type: ignore[union-attr]
        calls={key: n / per_family[key[0]] for key, n in calls.items()},
    )


ESCALATION_ROWS = [
    "adaptive, with escalation",
    "adaptive, without",
    "best-of-N, drafter's model",
    "stronger model alone, until it passes",
    "stronger model alone, at the budget",
]


def escalation_cell(fraction: float, count: int, budget: float, seed: int) -> tuple[float, dict[str, Spent]]:
    """Every row's figures on one batch, at ``budget`` fresh samples of the drafter's model per task (in USD,
    as measured on these tasks); and that budget in USD."""
    tasks = escalation_tasks(fraction, count, seed)
    unit = run_money("best_of_n", tasks, None, escalate=False, drafter=CHEAP, rounds=1).usd  # one fresh sample
    usd = budget * unit
    n = int(budget)
    rows = {
        "adaptive, with escalation": run_money("adaptive", tasks, usd, escalate=True, drafter=CHEAP),
        "adaptive, without": run_money("adaptive", tasks, usd, escalate=False, drafter=CHEAP),
        "best-of-N, drafter's model": run_money(
            "best_of_n", tasks, None, escalate=False, drafter=CHEAP, samples=n, rounds=1
        ),
        "stronger model alone, until it passes": run_money(
            "fixed:fresh", tasks, None, escalate=False, drafter=STRONG, rounds=STRONG_ROUNDS
        ),
        "stronger model alone, at the budget": run_money("fixed:fresh", tasks, usd, escalate=False, drafter=STRONG),
    }
    return usd, rows


def escalation_section(count: int, budgets: list[float], seed: int) -> bool:
    """Print the escalation cells at each budget; whether the criterion holds where a fifth of the tasks need the
    stronger model, at every budget."""
    solvable = FAMILIES["solvable"]
    print(
        f"\nEscalation: {count} tasks a batch; the drafter's model at ${CHEAP_USD[0]:g}/${CHEAP_USD[1]:g} per million "
        f"prompt/answer tokens, the stronger model at ${STRONG_USD[0]:g}/${STRONG_USD[1]:g} (15 times). Solvable "
        f"tasks: a fresh sample of the drafter's model right {solvable.fresh:.0%}, a revision {solvable.fix:.0%}; the "
        f"others never by it; the stronger model right {solvable.strong:.0%} a call on any task. The budget per task "
        f"is counted in the drafter's fresh samples (in USD, as measured on the batch).\n"
    )
    print(
        "| budget (fresh samples) | stronger-only tasks | policy | pass rate | USD per task | cost / budget "
        "| cost / stronger alone | pass - stronger alone (points) | calls per task (solvable; stronger-only) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    verdicts = []
    for budget in budgets:
        for fraction in FRACTIONS:
            usd, rows = escalation_cell(fraction, count, budget, seed)
            alone = rows["stronger model alone, until it passes"]
            for name in ESCALATION_ROWS:
                row = rows[name]
                print(
                    f"| {budget:g} ({usd * 1e6:.0f} µ$) | {fraction:.0%} | {name} | {row.passed:.1%} "
                    f"| {row.usd * 1e6:.1f} µ$ | {row.usd / usd:.2f} | {row.usd / alone.usd:.2f} "
                    f"| {100 * (row.passed - alone.passed):+.1f} | {_where(row)} |",
                    flush=True,
                )
            if fraction == 0.2:
                bought = rows["adaptive, with escalation"]
                holds = bought.passed >= alone.passed - POINTS / 100 and bought.usd <= COST_SHARE * alone.usd
                verdicts.append(f"{budget:g}: {'holds' if holds else 'MISSED'}")
    print(
        f"\ncriterion (a fifth of the tasks need the stronger model: with escalation, within {POINTS:g} points of "
        f"its pass rate alone at no more than {COST_SHARE:g} of its cost), by budget: {', '.join(verdicts)}"
    )
    return all(v.endswith("holds") for v in verdicts)


def _where(row: Spent) -> str:
    """Calls per task of each family, by action (f fresh, r revise, c critique, e escalate)."""
    cells = []
    for family in ("solvable", "strong_only"):
        counts = {a: row.calls.get((family, a), 0.0) for a in ("fresh", "revise", "critique", "escalate")}
        if any(counts.values()):
            cells.append(" ".join(f"{a[0]} {n:.1f}" for a, n in counts.items() if n))
    return "; ".join(cells) or "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["mixes", "escalation"], help="one section (default: both)")
    parser.add_argument("--tasks", type=int, default=1000, help="tasks per mix")
    parser.add_argument("--budget", type=int, default=4, help="model calls per task on average")
    parser.add_argument("--samples", type=int, default=1, help="drafts per round (adaptive and fixed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--turns", type=int, default=3, help="alternating timed turns for the cost of deciding")
    parser.add_argument("--verbose", action="store_true", help="every policy's figures per mix")
    parser.add_argument("--escalation-tasks", type=int, default=1000, help="tasks per escalation batch")
    parser.add_argument(
        "--usd-budget",
        type=float,
        nargs="+",
        default=[20.0, 40.0],
        help="escalation's budgets per task, in the drafter's fresh samples (20: about what the stronger model "
        "alone spends to pass)",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    ok = True
    if args.only != "escalation":
        ok = mixes_section(args)
    if args.only != "mixes":
        ok = escalation_section(args.escalation_tasks, args.usd_budget, args.seed) and ok
    print(f"\n{time.perf_counter() - started:.1f} s in all")
    return 0 if ok else 1


def mixes_section(args: argparse.Namespace) -> bool:
    """Print the mixes' table and the cost of deciding; whether every mix met its targets."""
    print(f"{args.tasks} tasks per mix, {args.budget} calls per task on average, {args.samples} draft(s) a round\n")
    print(
        "| mix | adaptive (calls/task) | best fixed | adaptive / best fixed | best-of-N | adaptive - best-of-N "
        "(points) | self-consistency | targets |"
    )
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for name, mix in MIXES.items():
        tasks = mix_tasks(mix, args.tasks, args.seed)
        row = Row(name, {p: figures(run_policy(p, tasks, args.budget, args.samples)) for p in POLICIES})
        rows.append(row)
        print(row.line(), flush=True)
        if args.verbose:
            for policy, (rate, calls) in row.rates.items():
                print(f"    {policy:16} pass {rate:6.1%}   calls/task {calls:5.2f}")
    overhead = cost_of_deciding(mix_tasks(MIXES["a bit of each"], args.tasks, args.seed), args.budget, args.turns)
    print(
        f"\ncost of deciding, zero latency, median of {args.turns} turns: adaptive / adversarial per round "
        f"{overhead.per_round:.3f}, per model call {overhead.per_call:.3f}; deciding is {overhead.deciding:.1%} "
        f"of adaptive's run ({overhead.micros:.0f} us a round)"
    )
    missed = [r.mix for r in rows if not r.ok]
    print(
        f"\ntargets (>= {RATIO} of the best fixed allocation, no more than {BEHIND:g} point below best-of-N): "
        f"{len(rows) - len(missed)} of {len(rows)} mixes met"
    )
    return not missed


if __name__ == "__main__":
    raise SystemExit(main())
