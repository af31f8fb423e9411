"""`adaptive`: each call goes where, across the batch, calls like it have paid.

Revising beats resampling only with specific, reliable feedback the model can
act on (Olausson et al. 2024; Huang et al. 2024), and the best split between the
two depends on the task (Snell et al. 2024). So this strategy does not fix the
split: it learns it, online, from the loop's own feedback, across the whole batch.

Round 0 samples afresh. Every later round, for each of its K slots, it chooses an
action: a fresh sample, a revision of the best candidate so far with the verifier's
feedback, or a revision that also carries a critique of it (the critique is a call,
charged). What it weighs (`redraft.strategies._choice`) is each action's chance of
raising the task's best feedback score: the batch's rate in the same feedback state
(`feedback_state`), drawn from a posterior whose prior for the dearer actions is
what the batch has seen fresh samples achieve (empirical Bayes), then this task's
own calls, which soon outweigh it (a revision that handed back a failing answer
counts against revising here several times over). It picks the highest chance per
call spent. What was chosen, in which state and against which best, travels with
each draft request as its `Intent`, into the trace; the counts live in the batch's
`Ledger`.

See docs/architecture.md, section "Adaptive: when it stops, the bank, escalation".
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgspec

from redraft import services
from redraft.protocols.messages import Action, FeedbackState, Intent, Result, StopReason, Verification
from redraft.strategies._base import (
    RoundContext,
    RoundOutcome,
    Scored,
    Share,
    Strategy,
    agreement,
    rank,
    strategy,
)
from redraft.strategies._choice import (
    CHEAP,
    REPEATED,
    REVISING,
    WORTH,
    Standing,
    best_value,
    escalates,
    plan,
    reach,
    settled,
)
from redraft.strategies._ledger import ACTIONS, CallOutcome, Ledger, Table, Tally

NEAR = 0.75
"""A best score at least this (below the threshold) is a near pass."""


def feedback_state(verification: Verification | None) -> FeedbackState:
    """What the feedback on the best candidate offers a revision (see `redraft.protocols.messages.FeedbackState`)."""
    if verification is None:
        return "first"
    if verification.score >= NEAR:
        return "near"
    if any(not check.passed and check.detail.strip() for check in verification.checks):
        return "localized"
    return "score" if verification.score > 0 else "none"


@dataclass
class _Memo:
    """What the strategy keeps of one task between rounds (in its `RoundContext.state`)."""

    best: Scored | None = None
    own: Table = field(default_factory=dict)
    batch: Table = field(default_factory=dict)
    answers: Counter[str] = field(default_factory=Counter)
    said: set[str] = field(default_factory=set)
    """The texts of the task's failing candidates: a revision that hands one back is a repeat."""
    missed: Counter[Action] = field(default_factory=Counter)
    """The task's calls of the drafter's model that did not raise its best, by action (for `reach`)."""
    paid: dict[Action, tuple[float, int]] = field(default_factory=dict)
    """What the task's drafts of each action cost in all, in its share's unit, and how many there were."""

    def pay(self, ctx: RoundContext, scored: Sequence[Scored], chosen: dict[int, Action]) -> None:
        """Count what this round's drafts cost, by action, in the unit of the task's share (none, or calls:
        nothing to count, every call is one)."""
        share = ctx.share
        if share is None or share.unit == "calls":
            return
        for candidate in scored:
            action = chosen[candidate.draft.sample]
            total, count = self.paid.get(action, (0.0, 0))
            self.paid[action] = (total + share.spent(ctx.priced(candidate.draft)), count + 1)

    def price(self, action: Action) -> float | None:
        """The task's mean cost of a draft of ``action``, in its share's unit; None before its first."""
        total, count = self.paid.get(action, (0.0, 0))
        return total / count if count else None

    candidates: int = 0
    borrowed: float = 0.0
    calls: float = math.inf
    """Calls the next round may spend."""

    def agreeing(self, scored: list[Scored]) -> list[Scored]:
        """This round's candidates, counted in, each with its answer's share of every candidate of the task
        so far: agreement over every round, so the majority of all the task's samples leads (self-consistency)."""
        self.answers.update(s.verification.answer for s in scored if s.verification.answer is not None)
        self.candidates += len(scored)
        return [dataclasses.replace(s, agreement=self.share(s)) for s in scored]

    def learn(self, scored: Sequence[Scored], observations: Sequence[CallOutcome]) -> None:
        """Count this round's calls in the task's own table (a failing answer a revision reproduced counts
        `REPEATED` times against both ways of revising; a fresh sample's repeat, an independent draw, once),
        then remember what its failing candidates said (round 0's fresh samples teach nothing: none is observed)."""
        for candidate, seen in zip(scored, observations, strict=bool(observations)):
            self._count(seen.state, seen.action, seen.improved)
            if seen.action in CHEAP and not seen.improved:
                self.missed[seen.action] += 1
            if seen.action in REVISING and not candidate.verification.passed and _said(candidate) in self.said:
                # a failing answer handed back by a revision: given the same best, revising gives it again
                for action in REVISING:
                    self._count(seen.state, action, False, REPEATED - (action == seen.action))
        self.said.update(_said(c) for c in scored if not c.verification.passed)

    def _count(self, state: FeedbackState, action: Action, improved: bool, times: int = 1) -> None:
        for _ in range(times):
            self.own[(state, action)] = self.own.get((state, action), Tally()).plus(improved)

    def share(self, candidate: Scored) -> float:
        answer = candidate.verification.answer
        return self.answers[answer] / self.candidates if answer is not None and self.candidates else 0.0


@strategy("adaptive")
class Adaptive(Strategy):
    """Each call a fresh sample, a revision or a critiqued one: where the batch learned it pays (Thompson sampling).

    With ``--calls-per-task``, the batch's tasks share a bank of calls: what one that passes early leaves, one
    still failing spends."""

    critic_role = "critic"
    shares_batch: ClassVar[bool] = True
    stops_itself: ClassVar[bool] = True
    worth: ClassVar[float] = WORTH
    """A task goes on while some action's expected chance per call is at least this (0: until spent)."""

    def __init__(self) -> None:
        self._ledgers: dict[str, Any] = {}

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        memo: _Memo = ctx.state.setdefault("adaptive", _Memo())
        before = memo.best
        if before is None:
            share = ctx.share
            n = ctx.samples if share is None or share.unit != "calls" else max(1, min(ctx.samples, int(share.amount)))
            scored, chosen = await _drafted(ctx, Counter({"fresh": n}), Intent(action="fresh", state="first"), None)
            observations: list[CallOutcome] = []
        else:
            state = feedback_state(before.verification)
            actions = self.choose(ctx, memo, state)
            intent = Intent(action="fresh", state=state, best_score=before.verification.score)
            scored, chosen = await _drafted(ctx, Counter(actions), intent, before)
            observations = _observed(ctx, scored, chosen, before)
        memo.pay(ctx, scored, chosen)
        memo.learn(scored, observations)
        memo.batch = await self._call(ctx, "record", observations)
        scored = memo.agreeing(scored)
        leader = rank(scored)[0]
        tie_wins = before is not None and memo.share(leader) > memo.share(before)
        score = leader.verification.score
        if before is None or score > before.verification.score or (tie_wins and score == before.verification.score):
            memo.best = leader
        return RoundOutcome(scored, tie_wins=tie_wins, stop=await self._stop(ctx, memo))

    def choose(self, ctx: RoundContext, memo: _Memo, state: FeedbackState) -> list[Action]:
        """This round's actions, one per draft (`plan`, on what the batch and this task taught)."""
        if state == "none":  # nothing for a revision to act on, nor any score to tell what it bought: sample
            return ["fresh"] * int(max(1.0, min(ctx.samples, memo.calls)))
        rng = random.Random(ctx.seed(f"{ctx.round}:plan", 0))
        return plan(ctx.samples, memo.calls, state, memo.batch, _standing(ctx, memo, state), rng)

    async def finish(self, ctx: RoundContext, result: Result) -> None:
        memo: _Memo | None = ctx.state.get("adaptive")
        if ctx.share is not None and memo is not None:
            net = ctx.share.amount + memo.borrowed - ctx.share.spent(ctx.spent)
            await self._call(ctx, "settle", ctx.task.task_id, net)

    async def _stop(self, ctx: RoundContext, memo: _Memo) -> tuple[StopReason, str] | None:
        """Why the task should stop now (None: go on), and what the next round may spend."""
        assert memo.best is not None
        if ctx.final_round or memo.best.verification.score >= ctx.threshold:
            return None  # the protocol stops it
        state = feedback_state(memo.best.verification)
        standing = _standing(ctx, memo, state)
        if state == "none":  # nothing for a revision to act on: sample until the majority is settled
            if (chance := settled(memo.answers)) is not None:
                return "stable", f"no feedback signal, and its answer is settled (the majority with p = {chance:.3f})"
        elif (value := best_value(state, memo.batch, standing))[0] < self.worth:
            return "no_improvement", (
                f"no action is worth a call: the best, {value[1]}, raises the best score with an expected "
                f"{value[0]:.3f} a call (< {self.worth:g}), from what the batch and this task have seen"
            )
        share = ctx.share
        if share is None:
            return None
        per_call = _per_call(ctx, share, memo)
        left = share.amount + memo.borrowed - share.spent(ctx.spent)
        want = ctx.samples * per_call
        if standing.escalation is not None and state != "none" and escalates(state, memo.batch, standing):
            want = max(want, standing.escalation * per_call)  # enough for the one call worth most
        lent = 0.0
        if left < want:
            lent = await self._call(ctx, "borrow", f"{ctx.task.task_id}/{ctx.round + 1}", want - left)
        memo.borrowed += lent
        # rounded: a loan of exactly what was missing pays for one whole call, not 0.999...
        memo.calls = round((left + lent) / per_call, 9) if per_call > 0 else float(ctx.samples)
        if memo.calls < 1:
            spent = f"its share of {share.amount:g} {share.unit} per task is spent"
            return "budget", f"{spent}, and the bank cannot pay for another call"
        return None

    async def _call(self, ctx: RoundContext, method: str, *args: Any) -> Any:
        """Call the batch's ledger (one per batch: a named actor on a cluster, an object in one process)."""
        here = services.current()
        if ctx.batch not in self._ledgers:
            self._ledgers[ctx.batch] = here.shared(Ledger, ledger_name(ctx.batch), per_node=False, num_cpus=0)
        return await here.call(self._ledgers[ctx.batch], method, *args)


def _standing(ctx: RoundContext, memo: _Memo, state: FeedbackState) -> Standing:
    """What this task adds to the batch's rates (`redraft.strategies._choice.Standing`): its own calls, its
    actions' prices in fresh samples as it has paid them, an escalation's price, and, with one on offer, its
    reach."""
    fresh = memo.price("fresh")
    prices: dict[Action, float] = {}
    if fresh:
        prices = {a: paid / fresh for a in ACTIONS if (paid := memo.price(a)) is not None}
    escalation = None
    if ctx.escalation is not None:
        escalation = prices.pop("escalate", None) or ctx.escalation.ratio(ctx.spent)
    within = 1.0 if ctx.escalation is None else reach(state, memo.batch, memo.missed)
    return Standing(own=memo.own, prices=prices, escalation=escalation, within=within)


def _per_call(ctx: RoundContext, share: Share, memo: _Memo) -> float:
    """What a fresh sample of the drafter's model costs of ``share``: 1 in calls; in tokens or USD, this task's
    mean so far (before one is paid, its mean call's, of the drafter's model where there is an escalation)."""
    if share.unit != "calls" and (fresh := memo.price("fresh")):
        return fresh
    calls = max(ctx.spent.calls, 1)
    if share.unit == "usd" and ctx.escalation is not None:
        return ctx.escalation.drafter_cost(ctx.spent) / calls
    return share.spent(ctx.spent) / calls


def _said(candidate: Scored) -> str:
    """A candidate's text, whitespace aside: a revision that hands back a failing text word for word did not act
    on the feedback (the same answer worded anew may be a new attempt, among few possible answers)."""
    return " ".join(candidate.draft.text.split())


def ledger_name(batch: str) -> str:
    """The name the ledger of ``batch`` is shared under."""
    return f"redraft-ledger-{batch}"


async def _drafted(
    ctx: RoundContext, counts: Counter[Action], intent: Intent, best: Scored | None
) -> tuple[list[Scored], dict[int, Action]]:
    """Draft ``counts`` of each action at once (samples numbered in the order of `ACTIONS`), then verify them;
    the candidates, and the action of each by sample."""
    revision = ctx.revision
    if counts["critique"] and best is not None and revision is not None:
        [critique] = await ctx.critique([best.draft], role="critic", stance="adversarial")
        revision = msgspec.structs.replace(revision, issues=[*revision.issues, *critique.issues])
    calls, first, chosen = [], 0, dict[int, Action]()
    for action in ACTIONS:
        if counts[action]:
            intended = msgspec.structs.replace(intent, action=action)
            given = revision if action == "critique" else None
            fresh = action in ("fresh", "escalate")  # an escalation is the stronger model's own sample
            calls.append(ctx.draft(counts[action], fresh=fresh, revision=given, first=first, intent=intended))
            chosen |= dict.fromkeys(range(first, first + counts[action]), action)
            first += counts[action]
    drafts = [d for batch in await asyncio.gather(*calls) for d in batch]
    verifications = await ctx.verify(drafts)
    agreements = agreement(verifications)
    return [Scored(d, v, a) for d, v, a in zip(drafts, verifications, agreements, strict=True)], chosen


def _observed(
    ctx: RoundContext, scored: Sequence[Scored], chosen: dict[int, Action], best: Scored
) -> list[CallOutcome]:
    """What this round's calls taught, for the ledger."""
    state = feedback_state(best.verification)
    return [
        CallOutcome(
            key=f"{ctx.task.task_id}/{ctx.round}/{s.draft.sample}",
            state=state,
            action=chosen[s.draft.sample],
            improved=s.verification.score > best.verification.score,
        )
        for s in scored
    ]
