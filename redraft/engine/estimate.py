"""A run's cost before its first call: the real loop run in this process over its tasks, with models that call
nothing (`redraft.engine._costing`), priced by the run's price table.

Each task (or a seeded sample of `SAMPLE`, scaled up to every task) goes through the
real arbiter and the real strategy, so the calls a round makes, the critiques, the
reflections, the stages and a batch budget's bank are the strategy's own; only the
models and the verifier's verdicts are doubles. Three courses are simulated:

- **worst case**: every answer as long as its ``max_tokens`` allows, the feedback never
  passing, every task running to ``--max-rounds`` (a per-task budget, or an adaptive
  strategy's share of the batch's budget, may end it sooner, as in a run);
- **first pass**: every task passes its first round, answers filling half of their
  ``max_tokens`` (the least a task costs under that assumption);
- **expected**, an assumption and said to be one: half the tasks pass at their first
  round and the rest run to the cycle limit, answers filling half of their
  ``max_tokens``. When the run directory already holds finished tasks (a resume),
  the expected cost is their mean real cost instead, times the tasks left.

See docs/architecture.md, section "What an estimate counts".
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from redraft import services
from redraft.backends import batchable
from redraft.backends.base import BackendSpec
from redraft.config import Budgets, RunConfig
from redraft.engine._costing import CostingSpec, CostingVerifier, Course, PromptCaching
from redraft.engine._judge_cost import judge_assumption, judge_models, judged
from redraft.engine._refine import run_blocking
from redraft.engine._wall_time import basis, wall_seconds
from redraft.engine._wall_time import duration as duration  # the command line says its times by it too
from redraft.engine.arbiter import Arbiter
from redraft.engine.pools import LocalMember, Roles
from redraft.engine.resolution import Cast, ResolvedRun
from redraft.engine.resolution import model_of as model_of  # the tune prices its proposer by it too
from redraft.protocols.messages import Result, Task, Usage
from redraft.strategies import ledger_name

SAMPLE = 200
"""Tasks simulated at most; a larger run is estimated from a seeded sample of this many."""
IN_FLIGHT = 32
"""Simulated tasks at once (they share the batch's budget, as a run's tasks in flight do)."""
WORST = Course(passes=False, fill=1.0)
FAILING = Course(passes=False, fill=0.5)
PASSING = Course(passes=True, fill=0.5)

T = TypeVar("T")


class Spend(msgspec.Struct, frozen=True):
    """What some tasks spend, by role (`RoleName`)."""

    by_role: dict[str, Usage] = {}

    @property
    def total(self) -> Usage:
        return sum(self.by_role.values(), Usage())

    def __add__(self, other: Spend) -> Spend:
        roles = self.by_role.keys() | other.by_role.keys()
        return Spend({r: self.by_role.get(r, Usage()) + other.by_role.get(r, Usage()) for r in sorted(roles)})

    def scaled(self, factor: float) -> Spend:
        """Each figure times ``factor`` (token and call counts rounded)."""
        return Spend({role: _scaled(usage, factor) for role, usage in self.by_role.items()})

    def cold(self) -> Spend:
        """The same, with no token counted as read back from a prompt cache: the worst case's count (its USD, the
        larger course's, is the cold course's answering at its limits wherever that spends more)."""
        return Spend({r: msgspec.structs.replace(u, cached_tokens=0) for r, u in self.by_role.items()})

    def most(self, other: Spend) -> Spend:
        """Each role's figures, each the larger of the two."""
        roles = sorted(self.by_role.keys() | other.by_role.keys())
        return Spend({r: _most(self.by_role.get(r, Usage()), other.by_role.get(r, Usage())) for r in roles})


def _scaled(usage: Usage, factor: float) -> Usage:
    figures: dict[str, Any] = {
        name: value * factor if isinstance(value := getattr(usage, name), float) else round(value * factor)
        for name in Usage.__struct_fields__
    }
    return Usage(**figures)


def _most(a: Usage, b: Usage) -> Usage:
    return Usage(**{name: max(getattr(a, name), getattr(b, name)) for name in Usage.__struct_fields__})


@dataclass(frozen=True)
class Estimate:
    """What a run is estimated to spend on the tasks it has left, and on what assumptions (`assumptions`)."""

    tasks: int
    """Tasks the estimate covers: those the run has left."""
    simulated: int
    """Tasks the simulation ran (all of them, or a sample scaled up to ``tasks``)."""
    first_pass: Spend
    """If every task passed its first round."""
    expected: Spend
    worst: Spend
    models: dict[str, str]
    """Each role's model (the name the price table is asked for)."""
    unpriced: tuple[str, ...] = ()
    """Models the price table does not know: their calls are counted, not priced."""
    free: bool = False
    """Every model is local or scripted: nothing costs USD."""
    done: int = 0
    """Tasks an earlier invocation finished (a resume); not in the estimate."""
    spent: Usage = field(default_factory=Usage)
    """What those tasks spent (run budgets count it)."""
    assumptions: tuple[str, ...] = ()
    """How the figures were made, one sentence each, for people."""
    samples: int = 1
    """Drafts a round: ``--samples``, or 1 for a strategy that drafts one candidate (``plan_execute``)."""
    in_flight: int | None = None
    """Tasks at once (``--max-tasks-in-flight``; None: the dispatcher's default), for the wall time."""

    def wall(self, spend: Spend) -> float:
        """``spend``'s wall time in seconds at each model's speed (`redraft.engine._wall_time`)."""
        return wall_seconds(spend.by_role, self.models, self.in_flight)

    def summary(self) -> str:
        """The estimate in one line: time first, then money (or calls and tokens where the models cost none)."""
        worst, expected = self.worst.total, self.expected.total
        calls = f"{expected.calls:,} calls expected, {worst.calls:,} at most"
        head = f"estimate: {self.tasks:,} task{'s' if self.tasks != 1 else ''}"
        head += f", about {duration(self.wall(self.expected))} expected, {duration(self.wall(self.worst))} at most"
        if self.free:
            return f"{head}; {calls}, {worst.total_tokens:,} tokens at most (the models cost no USD)"
        return f"{head}; expected {self.usd(expected)}, worst case {self.usd(worst)}; {calls}"

    def usd(self, usage: Usage, role: str | None = None) -> str:
        """USD as the estimate shows it: ``unpriced`` for what the price table cannot price, never a made-up $0."""
        models = [self.models[role]] if role is not None else list(self.models.values())
        unpriced = [m for m in models if m in self.unpriced]
        if unpriced and len(unpriced) == len(models):
            return "unpriced"
        return _dollars(usage.cost_usd) + (" + unpriced" if unpriced else "")

    def over_budget(self, budgets: Budgets) -> list[str]:
        """A line for each run budget the worst case is over (what earlier invocations spent counts against it),
        with how many tasks the budget pays for at the worst case."""
        lines = []
        for flag, setting, unit in _BUDGETS:
            limit = getattr(budgets, setting)
            if limit is None or (unit == "spent_usd" and self.free) or not self.tasks:
                continue
            left = limit - getattr(self.spent, unit)
            worst, expected = getattr(self.worst.total, unit), getattr(self.expected.total, unit)
            if left <= 0:
                spent = _amount(unit, getattr(self.spent, unit))
                lines.append(f"{flag} {limit:g} is spent already ({spent} by the tasks done): the run will start none")
                continue
            if worst <= left:
                continue
            covered = max(0, min(self.tasks, int(left / (worst / self.tasks)))) if self.tasks else 0
            rest = f" ({_amount(unit, max(left, 0))} of it left)" if getattr(self.spent, unit) else ""
            line = (
                f"the worst case, {_amount(unit, worst)}, is over {flag} {limit:g}{rest}: the budget stops the run "
                f"after about {covered:,} of its {self.tasks:,} tasks if they all cost the worst case"
            )
            too = f" (the expected {_amount(unit, expected)} is over it too)" if expected > left else ""
            lines.append(line + too)
        return lines


_BUDGETS = (
    ("--budget-usd", "budget_usd", "spent_usd"),
    ("--budget-tokens", "budget_tokens", "total_tokens"),
    ("--budget-calls", "budget_calls", "calls"),
)
"""The run budgets an estimate is held against: flag, setting, and the `Usage` figure it counts (USD: what the run
pays, the response cache's savings left out, as the run's own budget counts it, `redraft.config.Budgets`)."""


def _amount(unit: str, value: float) -> str:
    return _dollars(value) if unit == "spent_usd" else f"{value:,.0f} {unit.removeprefix('total_')}"


@dataclass(frozen=True)
class Done:
    """What the tasks a run directory already holds spent (a resume's, else none)."""

    tasks: int = 0
    spend: Spend = field(default_factory=Spend)

    def plus(self, result: Result) -> Done:
        return Done(self.tasks + 1, self.spend + Spend(dict(result.usage_by_role)))


def _dollars(usd: float) -> str:
    if usd >= 100:
        return f"${usd:,.0f}"
    return f"${usd:.2f}" if usd >= 1 else f"${usd:.4f}"


def estimate_tasks(run: ResolvedRun, tasks: Iterable[Task], *, done: Done = Done(), sample: int = SAMPLE) -> Estimate:
    """The estimate for ``tasks`` (those the run has left) of the resolved ``run``; ``done``: what the tasks the
    run directory already holds spent."""
    config = run.config
    total, picked = _sample(tasks, sample, config.experiment.seed)
    results = run_blocking(_simulate_all(run, picked), "redraft-estimate")
    worst, failing, passing = (
        [Spend(dict(r.usage_by_role) | judged(run, t, r, course)) for t, r in zip(picked, ended, strict=True)]
        for course, ended in zip((WORST, FAILING, PASSING), results, strict=True)
    )
    factor = total / len(picked) if picked else 0.0
    per_task_worst = [w.most(f).cold() for w, f in zip(worst, failing, strict=True)]
    first_pass = _sum(passing).scaled(factor)
    expected = (_sum(passing) + _sum(failing)).scaled(factor / 2)
    if done.tasks:
        expected = done.spend.scaled(total / done.tasks)
    models = _models(run.cast) | judge_models(run)
    prices = run.settings.prices
    unpriced = tuple(sorted({m for m in models.values() if not prices.free(m) and prices.price_of(m) is None}))
    free = all(prices.free(m) for m in models.values())
    errors = [r.error for course in results for r in course if r.error]
    said = _assumptions(config, total, len(picked), done.tasks, errors, expected.total) + judge_assumption(run)
    if unpriced:
        said += (f"unpriced: {', '.join(unpriced)}, not in the price table: counted, not priced (--prices FILE)",)
    if free:
        said += ("USD: the models are local or scripted, and cost nothing",)
    said += (basis(models),)
    return Estimate(
        tasks=total,
        simulated=len(picked),
        first_pass=first_pass,
        expected=expected,
        worst=_sum(per_task_worst).scaled(factor),
        models=models,
        unpriced=unpriced,
        free=free,
        done=done.tasks,
        spent=done.spend.total,
        assumptions=said,
        samples=1 if run.strategy.single_sample else config.experiment.samples,
        in_flight=config.runtime.max_tasks_in_flight,
    )


def _sum(spends: Iterable[Spend]) -> Spend:
    return sum(spends, Spend())


def _sample(tasks: Iterable[Task], size: int, seed: int) -> tuple[int, list[Task]]:
    """How many tasks there are, and a seeded uniform sample of at most ``size`` of them, in their order."""
    rng = random.Random(seed)
    kept: list[tuple[int, Task]] = []
    seen = 0
    for seen, task in enumerate(tasks, 1):
        if len(kept) < size:
            kept.append((seen, task))
        elif (slot := rng.randrange(seen)) < size:
            kept[slot] = (seen, task)
    return seen, [task for _, task in sorted(kept, key=lambda pair: pair[0])]


async def _simulate_all(run: ResolvedRun, tasks: list[Task]) -> list[list[Result]]:
    return [await _simulate(run, tasks, course) for course in (WORST, FAILING, PASSING)]


async def _simulate(run: ResolvedRun, tasks: list[Task], course: Course) -> list[Result]:
    """Each task's result through the real loop, its roles doubles that follow ``course``."""
    batch = f"estimate-{uuid.uuid4().hex[:12]}"
    settings = msgspec.structs.replace(run.settings, batch=batch, paced_roles=frozenset())
    arbiter = Arbiter(costing_roles(run, course), settings)
    slots = asyncio.Semaphore(IN_FLIGHT)

    async def one(task: Task) -> Result:
        async with slots:
            result = (await arbiter.run(task.without_gold()))[-1]
        assert isinstance(result, Result)
        return result

    try:
        return list(await asyncio.gather(*(one(task) for task in tasks)))
    finally:  # a strategy that shares a batch's budget left its ledger with this process's services
        if isinstance(here := services.current(), services.InProcess):
            here.objects.pop(ledger_name(batch), None)


def costing_roles(run: ResolvedRun, course: Course) -> Roles:
    """The roles ``run``'s strategy needs, in this process, every model a `CostingSpec` of the model it stands in
    for and the verifier a `CostingVerifier` that follows ``course``."""
    setup = run.setup

    def double(spec: BackendSpec) -> CostingSpec:
        batch = run.runtime.batch and batchable(spec) is not None
        caching = PromptCaching.of(spec, cold=course is WORST)
        return CostingSpec(model=model_of(spec), fill=course.fill, batch=batch, caching=caching)

    costing = run.with_setup(
        drafter=double(setup.drafter),
        critic=double(setup.critic),
        verifier=double(setup.verifier) if setup.verifier is not None else None,
        cache=False,
    )
    made = dict(costing.cast.roles)
    convergence = run.settings.convergence
    _, args, kwargs = made["verifier"]
    verdicts = {"course": course, "rounds": convergence.max_rounds, "threshold": convergence.threshold}
    made["verifier"] = (CostingVerifier, args, kwargs | verdicts)
    return Roles.of({name: [LocalMember(cls(*a, **k))] for name, (cls, a, k) in made.items()})


def _models(cast: Cast) -> dict[str, str]:
    """Each role's model, for the roles the cast's strategy starts that call one."""
    setup = cast.setup
    specs: dict[str, BackendSpec | None] = {
        "drafter": setup.drafter,
        "critic": setup.critic,
        "self_critic": setup.drafter,
        "verifier": cast.verifier_model,
    }
    return {role: model_of(spec) for role, spec in specs.items() if role in cast.roles and spec is not None}


def _assumptions(
    config: RunConfig, tasks: int, simulated: int, done: int, errors: list[str], expected: Usage
) -> tuple[str, ...]:
    e = config.experiment
    said = [
        f"simulated: a seeded sample of {simulated:,} of the {tasks:,} tasks, scaled up to all of them"
        if simulated < tasks
        else f"simulated: all {tasks:,} tasks, through the real loop, with models that call nothing",
        f"worst case: every answer at its max tokens (--max-tokens {e.max_tokens} a draft), the feedback never "
        f"passing, every task to --max-rounds {e.max_rounds}" + _sooner(config),
        f"expected: the mean real cost of the {done:,} tasks the run directory holds, times the {tasks:,} left"
        if done
        else "expected: assumed, not known: half the tasks pass at once, the rest run to the cycle limit, "
        "answers at half their max tokens",
        "tokens: about 4 characters each; no response cache hits (a real run may have some)",
        _prompt_cache(expected, done),
    ]
    if errors:
        said.append(f"incomplete: {len(errors)} simulated task(s) ended in error ({errors[0]})")
    return tuple(said)


def _prompt_cache(expected: Usage, done: int) -> str:
    """The expected course's prompt cache hit rate, and how it was come to."""
    rate = expected.cached_tokens / expected.input_tokens if expected.input_tokens else 0.0
    if done:
        return f"prompt cache: a {rate:.0%} hit rate, what the {done:,} tasks done were served by the provider's cache"
    if not expected.cached_tokens and not expected.cache_write_tokens:
        return (
            "prompt cache: a 0% hit rate, every input token at its full price (no role's model is OpenAI's or "
            "Anthropic's, or no stable prefix reaches the provider's minimum)"
        )
    return (
        f"prompt cache: a {rate:.0%} hit rate expected (a task's stable prefix, its instructions and the task, read "
        "back from its second sending on where it reaches the provider's minimum; Anthropic's first sending "
        "written at its price); the worst case reads nothing back"
    )


def _sooner(config: RunConfig) -> str:
    """What else may end a task before the cycle limit, in the simulation as in a run."""
    e = config.experiment
    limits = [
        flag
        for flag, value in (
            ("--task-budget-usd", e.task_budget_usd),
            ("--task-budget-tokens", e.task_budget_tokens),
            ("--task-budget-calls", e.task_budget_calls),
            ("--calls-per-task", e.calls_per_task),
            ("--tokens-per-task", e.tokens_per_task),
        )
        if value is not None
    ]
    return f" or its {' and '.join(limits)} running out" if limits else ""


def paid(run: ResolvedRun) -> bool:
    """Whether a role ``run``'s strategy starts calls a model that costs money, or might (an unpriced one)."""
    return not all(run.settings.prices.free(model) for model in _models(run.cast).values())
