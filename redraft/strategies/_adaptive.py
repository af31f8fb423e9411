"""`adaptive`: each call goes where, across the batch, calls like it have paid.

Revising beats resampling only with specific, reliable feedback the model can
act on (Olausson et al. 2024; Huang et al. 2024), and the best split between the
two depends on the task (Snell et al. 2024). So this strategy does not fix the
split: it learns it, online, from the loop's own feedback, across the whole batch.

Round 0 samples afresh. Every later round, for each of its K slots, it chooses an
action by Thompson sampling: a fresh sample, a revision of the best candidate so
far with the verifier's feedback, or a revision that also carries a critique of
it (the critique is a call, charged). For each action it draws a chance of
raising the task's best feedback score from a Beta posterior: a prior that is
pessimistic for the dearer actions, the batch's calls in the same feedback state
(`feedback_state`; their weight capped, so a task's own calls still count), and
this task's own calls (a revision that failed here lowers revision's odds here).
It picks the highest draw per call spent. What was chosen, in which state and
against which best, travels with each draft request as its `Intent`, into the
trace; the counts live in the batch's `Ledger`.

With ``--calls-per-task`` B (or ``--tokens-per-task`` T), tasks share a bank: each
has B calls (T tokens); one that stops early leaves the rest there, and one still
failing borrows from it to go on. In tokens, a call is priced at what the task's
own calls have cost on average so far. A
task whose feedback gives no signal stops once its answer's majority is settled
(the Beta stopping rule of Adaptive-Consistency, Aggarwal et al. 2023).
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
    Strategy,
    agreement,
    rank,
    strategy,
)
from redraft.strategies._ledger import ACTIONS, CallOutcome, Ledger, Table, Tally

PRIORS: dict[Action, tuple[float, float]] = {"fresh": (1.0, 1.0), "revise": (1.0, 2.0), "critique": (1.0, 3.0)}
"""Beta(wins, losses) before any call: even odds for a fresh sample, worse for the dearer revisions (a revision's
prompt carries the candidate and its feedback; a critiqued one also pays the critic)."""
BATCH_WEIGHT = 50
"""The batch's calls in a state count as at most this many next to the task's own: enough to steer, not so many
that a task's own failures stop mattering or that early tasks freeze the choice for late ones."""
NEAR = 0.75
"""A best score at least this (below the threshold) is a near pass."""
SETTLED = 0.95
"""A task with no feedback signal stops once its leading answer is the majority with this probability."""


def feedback_state(verification: Verification | None) -> FeedbackState:
    """What the feedback on the best candidate offers a revision (see `redraft.protocols.messages.FeedbackState`)."""
    if verification is None:
        return "first"
    if verification.score >= NEAR:
        return "near"
    if any(not check.passed and check.detail.strip() for check in verification.checks):
        return "localized"
    return "score" if verification.score > 0 else "none"


def posterior(state: FeedbackState, action: Action, batch: Table, own: Table) -> tuple[float, float]:
    """Beta(a, b) of the chance that ``action`` in ``state`` raises the task's best score."""
    wins, losses = PRIORS[action]
    seen = batch.get((state, action), Tally())
    if seen.tries:
        weight = min(1.0, BATCH_WEIGHT / seen.tries)
        wins, losses = wins + weight * seen.wins, losses + weight * (seen.tries - seen.wins)
    mine = own.get((state, action), Tally())
    return wins + mine.wins, losses + mine.tries - mine.wins


def plan(slots: int, calls: float, state: FeedbackState, batch: Table, own: Table, rng: random.Random) -> list[Action]:
    """Up to ``slots`` drafts costing at most ``calls`` calls, each slot's action by Thompson sampling: the
    highest draw from its posterior per call it costs (a critique is one call, shared by every slot that
    revises with it)."""
    chosen: list[Action] = []
    left, critiqued = calls, False
    while len(chosen) < slots:
        draws: list[tuple[float, Action, float]] = []
        for action in ACTIONS:
            cost = 2.0 if action == "critique" and not critiqued else 1.0
            if cost <= left:
                draws.append((rng.betavariate(*posterior(state, action, batch, own)) / cost, action, cost))
        if not draws:
            break
        _, action, cost = max(draws)
        chosen.append(action)
        left -= cost
        critiqued = critiqued or action == "critique"
    return chosen


def settled(answers: Counter[str], confidence: float = SETTLED) -> float | None:
    """The probability that the leading answer is the majority (Beta(v1 + 1, v2 + 1) above 1/2, v1 and v2 the
    two largest counts), if it is at least ``confidence``; None otherwise."""
    top = [*answers.most_common(2), ("", 0), ("", 0)]
    v1, v2 = top[0][1], top[1][1]
    n = v1 + v2 + 1  # P(Beta(v1+1, v2+1) > 1/2) = P(Binomial(v1+v2+1, 1/2) <= v1)
    chance = sum(math.comb(n, k) for k in range(v1 + 1)) / 2**n
    return chance if v1 and chance >= confidence else None


@dataclass
class _Memo:
    """What the strategy keeps of one task between rounds (in its `RoundContext.state`)."""

    best: Scored | None = None
    own: Table = field(default_factory=dict)
    batch: Table = field(default_factory=dict)
    answers: Counter[str] = field(default_factory=Counter)
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

    def __init__(self) -> None:
        self._ledgers: dict[str, Any] = {}

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        memo: _Memo = ctx.state.setdefault("adaptive", _Memo())
        before = memo.best
        if before is None:
            share = ctx.share
            n = ctx.samples if share is None or share.unit != "calls" else max(1, min(ctx.samples, int(share.amount)))
            scored, _ = await _drafted(ctx, Counter({"fresh": n}), Intent(action="fresh", state="first"), None)
            observations: list[CallOutcome] = []
        else:
            state = feedback_state(before.verification)
            actions = self.choose(ctx, memo, state)
            intent = Intent(action="fresh", state=state, best_score=before.verification.score)
            scored, chosen = await _drafted(ctx, Counter(actions), intent, before)
            observations = _observed(ctx, scored, chosen, before)
        for seen in observations:
            memo.own[(seen.state, seen.action)] = memo.own.get((seen.state, seen.action), Tally()).plus(seen.improved)
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
        return plan(ctx.samples, memo.calls, state, memo.batch, memo.own, rng)

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
        if feedback_state(memo.best.verification) == "none" and (chance := settled(memo.answers)) is not None:
            return "stable", f"no feedback signal, and its answer is settled (the majority with p = {chance:.3f})"
        share = ctx.share
        if share is None:
            return None
        per_call = share.spent(ctx.spent) / max(ctx.spent.calls, 1)  # 1 in calls; in tokens, this task's mean
        left = share.amount + memo.borrowed - share.spent(ctx.spent)
        want = ctx.samples * per_call
        lent = 0.0
        if left < want:
            lent = await self._call(ctx, "borrow", f"{ctx.task.task_id}/{ctx.round + 1}", want - left)
        memo.borrowed += lent
        memo.calls = (left + lent) / per_call if per_call > 0 else float(ctx.samples)
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
            fresh = action == "fresh"
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
