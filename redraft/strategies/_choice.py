"""How `adaptive` values an action: what the batch and the task say it will buy, and whether a call is worth it.

Two levels (empirical Bayes). The batch's rate for each (feedback state, action)
is a Beta posterior: for a fresh sample from even odds; for a dearer action
(revise, critique) from a prior centred on a share (`PRIOR_SHARE`) of what the
batch has seen fresh samples achieve in that state, weighing only `PRIOR_CALLS`
calls. So where nothing but sampling pays, the dearer actions start below sampling
and the first few of their failures keep them there; where revisions pay, the
first few of their wins put them above. The batch's calls weigh at most
`BATCH_WEIGHT`, so early tasks do not freeze the choice for late ones.

A slot's action is the highest expected chance per unit of what it costs, with the
batch's rate drawn from its posterior (Thompson sampling: the batch explores what it
is unsure of); a task is worth another call while some action's expected chance per
unit, at the batch's mean rate, is at least `WORTH`. The unit is a fresh sample of the
drafter's model (`cost`): in a budget of calls every call of that model is one; in
tokens or money each action is priced at what the task's own calls of it have cost
(`Standing.prices`), so a revision whose prompt carries the best, its feedback and the
earlier attempts is weighed at its real price.

See docs/architecture.md, section "Adaptive's choice: a task's own calls, and escalation"."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from redraft.protocols.messages import Action, FeedbackState
from redraft.strategies._ledger import ACTIONS, Table, Tally

FRESH_PRIOR: tuple[float, float] = (1.0, 1.0)
"""Beta(wins, losses) of a fresh sample's rate before the batch has seen one: even odds."""
PRIOR_CALLS = 2.0
"""A dearer action's prior weighs as this many calls at fresh samples' rate: a few of its own calls outweigh it."""
PRIOR_SHARE: dict[Action, float] = {"fresh": 1.0, "revise": 2 / 3, "critique": 1 / 2, "escalate": 1.0}
"""A dearer action's prior rate as a share of fresh samples': pessimistic, as the ratio of even odds to 1:2
(a revision) and 1:3 (a critiqued one), so a batch samples while it knows nothing, and learns from there."""
MIN_PRIOR_WINS = 0.5
"""A dearer action's prior holds at least half a win: where fresh samples never pay, an action the batch has
not tried still gets tried (a revision may pay where sampling does not), and a few failures settle it."""
BATCH_WEIGHT = 50
"""The batch's calls in a state count as at most this many: enough to steer, not so many that early tasks
freeze the choice for late ones."""
TASK_WEIGHT = 8.0
"""The batch's rate counts as this many calls next to a task's own: tasks of one batch differ (a revision
fixes one and not the next), yet a few failures of an independent draw on one task are mostly chance."""
REPEATED = 24
"""A revision that handed back a failing text of its task counts as this many failed revisions there (three
times the batch's weight): given the same best and feedback, it will give that text again. A fresh sample's
repeat is one failure: an independent draw that landed on the same wrong answer."""
REVISING: tuple[Action, ...] = ("revise", "critique")
"""The actions that revise the task's best: what one of them reproduces counts against both."""
CHEAP: tuple[Action, ...] = tuple(a for a in ACTIONS if a != "escalate")
"""The actions of the drafter's own model."""
WORTH = 0.02
"""A call is worth making while some action's expected chance of raising the task's best, per call it
costs, is at least this (one call in fifty)."""
REACH = 0.5
"""With a stronger model on offer, the odds before a task's first cheap call that the drafter's model can solve
it at all: even (a batch the cheap model solves whole loses about one escalation in twenty-five tasks to them)."""
SETTLED = 0.95
"""A task with no feedback signal stops once its leading answer is the majority with this probability."""


@dataclass(frozen=True)
class Standing:
    """What one task adds to the batch's rates: its own calls, what its actions cost, whether it is in reach."""

    own: Table = field(default_factory=dict)
    """The task's own calls, by (state, action) (reproduced failures counted `REPEATED` times)."""
    prices: Mapping[Action, float] = field(default_factory=dict)
    """Each of the drafter's actions' calls in fresh samples, as the task has paid them (1 where it has paid
    none, and in a budget of calls): in tokens or money, a revision, whose prompt carries the best and its
    feedback, costs more than a fresh sample."""
    escalation: float | None = None
    """An escalation's price in fresh samples; None: the run has no stronger model."""
    within: float = 1.0
    """The chance the drafter's model can still solve the task (`reach`); 1 where no escalation is on offer."""


def cost(action: Action, standing: Standing = Standing(), critiqued: bool = False) -> float:
    """What an action costs in fresh samples of the drafter's model: its price (`Standing.prices`), and for a
    critiqued revision the critique's call too, unless the round has one; an escalation its price (none: never
    affordable)."""
    if action == "escalate":
        return math.inf if standing.escalation is None else standing.escalation
    critique = 1.0 if action == "critique" and not critiqued else 0.0
    return standing.prices.get(action, 1.0) + critique


def fresh_rate(state: FeedbackState, batch: Table) -> float:
    """The mean rate at which the batch's fresh samples raised their task's best in ``state`` (every state
    pooled while it has none in this one)."""
    seen = batch.get((state, "fresh"), Tally())
    if not seen.tries:
        pooled = [tally for (_, action), tally in batch.items() if action == "fresh"]
        seen = Tally(sum(t.wins for t in pooled), sum(t.tries for t in pooled))
    wins, losses = FRESH_PRIOR
    return (wins + seen.wins) / (wins + losses + seen.tries)


def batch_posterior(state: FeedbackState, action: Action, batch: Table) -> tuple[float, float]:
    """Beta(a, b) of the batch's rate for ``action`` in ``state``: its prior, then the batch's calls (capped)."""
    if action in ("fresh", "escalate"):
        wins, losses = FRESH_PRIOR
    else:
        rate = PRIOR_SHARE[action] * fresh_rate(state, batch)
        wins, losses = max(PRIOR_CALLS * rate, MIN_PRIOR_WINS), PRIOR_CALLS * (1 - rate)
    seen = batch.get((state, action), Tally())
    if seen.tries:
        weight = min(1.0, BATCH_WEIGHT / seen.tries)
        wins, losses = wins + weight * seen.wins, losses + weight * (seen.tries - seen.wins)
    return wins, losses


def task_chance(rate: float, own: Tally) -> float:
    """The expected chance that one more call raises this task's best: the batch's ``rate`` weighing as
    `TASK_WEIGHT` calls, then the task's own calls (``own``, reproduced failures counted `REPEATED` times)."""
    return (TASK_WEIGHT * rate + own.wins) / (TASK_WEIGHT + own.tries)


def reach(state: FeedbackState, batch: Table, missed: Counter[Action]) -> float:
    """The chance the drafter's model can still solve a task whose cheap calls failed ``missed`` times (by
    action): `REACH` at first, each failure multiplying the odds by its action's chance of failing at the batch's
    mean rate in ``state``."""
    odds = REACH / (1 - REACH)
    for action in CHEAP:
        if missed[action]:
            wins, losses = batch_posterior(state, action, batch)
            odds *= (losses / (wins + losses)) ** missed[action]
    return odds / (1 + odds)


def plan(
    slots: int, calls: float, state: FeedbackState, batch: Table, standing: Standing, rng: random.Random
) -> list[Action]:
    """Up to ``slots`` drafts costing at most ``calls`` fresh samples, each slot's action the highest
    `task_chance` per unit of `cost`, on a batch rate drawn from its posterior (a critique is one call, shared by
    every slot revising with it; an escalation is offered only where `escalates`; the cheap actions' chances are
    scaled by the task's `reach`)."""
    offered = ACTIONS if escalates(state, batch, standing) else CHEAP
    chosen: list[Action] = []
    left, critiqued = calls, False
    while len(chosen) < slots:
        draws: list[tuple[float, Action, float]] = []
        for action in offered:
            price = cost(action, standing, critiqued)
            if price <= left:
                rate = rng.betavariate(*batch_posterior(state, action, batch))
                draws.append((_chance(rate, state, action, standing) / price, action, price))
        if not draws:
            break
        _, action, price = max(draws)
        chosen.append(action)
        left -= price
        critiqued = critiqued or action == "critique"
    return chosen


def _chance(rate: float, state: FeedbackState, action: Action, standing: Standing) -> float:
    """`task_chance` of ``action`` in ``state`` at the batch's ``rate``, a cheap action's scaled by the task's
    reach."""
    chance = task_chance(rate, standing.own.get((state, action), Tally()))
    return chance * (standing.within if action in CHEAP else 1.0)


def value(state: FeedbackState, action: Action, batch: Table, standing: Standing) -> float:
    """``action``'s expected chance of raising this task's best per unit of its cost, at the batch's mean rate."""
    wins, losses = batch_posterior(state, action, batch)
    return _chance(wins / (wins + losses), state, action, standing) / cost(action, standing)


def escalates(state: FeedbackState, batch: Table, standing: Standing) -> bool:
    """Whether the run's escalation is worth more per unit of cost than every cheap action here."""
    if standing.escalation is None:
        return False
    cheap = max(value(state, a, batch, standing) for a in CHEAP)
    return value(state, "escalate", batch, standing) > cheap


def best_value(state: FeedbackState, batch: Table, standing: Standing) -> tuple[float, Action]:
    """The highest expected chance per unit of cost of any action on this task, at the batch's mean rates, and
    its action (an escalation among them when the run has one)."""
    offered = CHEAP if standing.escalation is None else ACTIONS
    return max((value(state, a, batch, standing), a) for a in offered)


def settled(answers: Counter[str], confidence: float = SETTLED) -> float | None:
    """The probability that the leading answer is the majority (Beta(v1 + 1, v2 + 1) above 1/2, v1 and v2 the
    two largest counts), if it is at least ``confidence``; None otherwise."""
    top = [*answers.most_common(2), ("", 0), ("", 0)]
    v1, v2 = top[0][1], top[1][1]
    n = v1 + v2 + 1  # P(Beta(v1+1, v2+1) > 1/2) = P(Binomial(v1+v2+1, 1/2) <= v1)
    chance = sum(math.comb(n, k) for k in range(v1 + 1)) / 2**n
    return chance if v1 and chance >= confidence else None
