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

Run: `.venv/bin/python benchmarks/bench_adaptive.py` (``--tasks``, ``--budget``, ``--samples``).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from redraft.backends.base import ChatRequest
from redraft.backends.scripted import ScriptedSpec
from redraft.engine._refine import local_roles
from redraft.engine.arbiter import Arbiter, ArbiterSettings
from redraft.engine.setup import RoleSetup
from redraft.protocols.convergence import ConvergenceConfig
from redraft.protocols.messages import Action, CheckResult, FeedbackState, Result, Task
from redraft.scenarios import Scenario, scenario
from redraft.strategies import RoundContext, Share, get_strategy, strategy
from redraft.strategies._adaptive import Adaptive, _Memo

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


FAMILIES: dict[str, Family] = {
    "sampler": Family(fresh=0.30, fix=0.05, critiqued=0.05, feedback="localized"),
    "fixer": Family(fresh=0.05, fix=0.45, critiqued=0.45, feedback="localized"),
    "critiqued": Family(fresh=0.05, fix=0.05, critiqued=0.50, feedback="score"),
    "blind": Family(fresh=0.45, fix=0.30, critiqued=0.30, feedback="none"),
    "hard": Family(fresh=0.02, fix=0.03, critiqued=0.03, feedback="localized"),
    # the mixed batch: fixed only by a revision with the feedback, or only by a fresh sample
    "revisable": Family(fresh=0.0, fix=1.0, critiqued=1.0, feedback="localized"),
    "resamplable": Family(fresh=0.5, fix=0.0, critiqued=0.0, feedback="localized", echo=True),
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


@scenario("simulated")
class Simulated(Scenario):
    """Tasks of the mix named by the run; right is '42'."""

    name = "simulated"
    check_cost = "instant"

    def tasks(self, *, seed: int) -> Iterator[Task]:
        raise NotImplementedError("the benchmark makes its own tasks")

    def system_prompt(self) -> str:
        return "Answer."

    def answer(self, text: str) -> str | None:
        found = re.search(r"answer (\d+)", text)
        return found[1] if found else None

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
        local_roles(RoleSetup(scenario="simulated", drafter=model, critic=model), get_strategy(policy)), settings
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000, help="tasks per mix")
    parser.add_argument("--budget", type=int, default=4, help="model calls per task on average")
    parser.add_argument("--samples", type=int, default=1, help="drafts per round (adaptive and fixed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--turns", type=int, default=3, help="alternating timed turns for the cost of deciding")
    parser.add_argument("--verbose", action="store_true", help="every policy's figures per mix")
    args = parser.parse_args(argv)
    started = time.perf_counter()
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
        f"\n{time.perf_counter() - started:.1f} s in all; targets (>= {RATIO} of the best fixed allocation, "
        f"no more than {BEHIND:g} point below best-of-N): {len(rows) - len(missed)} of {len(rows)} mixes met"
    )
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
