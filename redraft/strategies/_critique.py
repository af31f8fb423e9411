"""Strategies in which a model critiques the candidates before the drafter revises."""

from __future__ import annotations

import asyncio
from typing import Any

from redraft.protocols.messages import Stance
from redraft.strategies._base import (
    RoundContext,
    RoundOutcome,
    Strategy,
    attach,
    contenders,
    needs_feedback,
    rank,
    sample_and_verify,
    strategy,
    with_critiques,
)


@strategy("self_refine")
class SelfRefine(Strategy):
    """The drafter's own model critiques its answer, then revises it (Madaan et al. 2023).

    Self-Refine: one model drafts, gives itself feedback and refines, with no
    other model involved. Its critic runs on the drafter's backend with the
    ``self`` instructions ("you wrote this; list your mistakes").
    """

    critic_role = "self_critic"

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        scored = await sample_and_verify(ctx, ctx.samples)
        return RoundOutcome(await with_critiques(ctx, scored, "self_critic", "self"))


@strategy("adversarial")
class Adversarial(Strategy):
    """A separate critic, told to find concrete faults, attacks the contenders; the drafter revises.

    The generator-critic pattern with a hostile reviewer (as in CriticGPT-style
    review, McAleese et al. 2024): the critic runs on its own backend
    (``--critic``), quotes the wrong span, says why and proposes a fix.
    """

    critic_role = "critic"

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        scored = await sample_and_verify(ctx, ctx.samples)
        return RoundOutcome(await with_critiques(ctx, scored, "critic", "adversarial"))


@strategy("debate")
class Debate(Strategy):
    """Two critics with different instructions; each sees the other's last critique; both are weighed.

    Multi-agent debate (Du et al. 2023; Irving et al. 2018): an ``adversarial``
    critic hunts for faults and a ``skeptic`` checks the task's requirements
    and the other's claims. Each round both critique the contenders in parallel,
    each shown the other's issues with the previous leader, to confirm, refute
    or add to. The arbiter ranks by the mean severity of the two and the
    revision gets both critiques' issues.
    """

    critic_role = "critic"
    stances: tuple[Stance, Stance] = ("adversarial", "skeptic")

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        scored = await sample_and_verify(ctx, ctx.samples)
        if not needs_feedback(ctx, scored):
            return RoundOutcome(scored)
        last: dict[str | None, Any] = ctx.state.setdefault("debate", {})  # stance -> issues with the last leader
        drafts = [s.draft for s in contenders(scored)]
        first, second = self.stances
        critiques = await asyncio.gather(
            ctx.critique(drafts, role="critic", stance=first, opponent=last.get(second)),
            ctx.critique(drafts, role="critic", stance=second, opponent=last.get(first)),
        )
        scored = attach(scored, [c for side in critiques for c in side])
        for critique in rank(scored)[0].critiques:
            last[critique.stance] = list(critique.issues)
        return RoundOutcome(scored)
