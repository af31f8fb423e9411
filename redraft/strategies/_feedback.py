"""Strategies whose feedback comes from the verifier's side, not from a critic."""

from __future__ import annotations

from dataclasses import replace

from redraft.strategies._base import (
    RoundContext,
    RoundOutcome,
    Strategy,
    needs_feedback,
    rank,
    sample_and_verify,
    strategy,
)


@strategy("verifier_only")
class VerifierOnly(Strategy):
    """No critic: the failed checks are the only feedback, with a memory of attempts and reflections (Reflexion).

    Reflexion (Shinn et al. 2023): after a failed attempt the drafter's model
    writes a short verbal diagnosis of what went wrong, kept with the attempt in
    the memory every later revision sees, next to the verifier's hard evidence.
    """

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        scored = await sample_and_verify(ctx, ctx.samples)
        if not needs_feedback(ctx, scored):
            return RoundOutcome(scored)
        reflection = await ctx.reflect(rank(scored)[0])
        return RoundOutcome(scored, reflection=reflection.text)


@strategy("cove")
class ChainOfVerification(Strategy):
    """The verifier's model asks questions about the leader's claims, answers each without it; the drafter revises.

    Chain-of-Verification (Dhuliawala et al. 2023), factored variant: the
    verifier role's model (``--verifier``, default ``--model``) plans up to
    `questions` verification questions about the round's leader, answers each
    in a separate call that never sees the candidate (so its errors are not
    copied), and the next revision gets the questions with their answers.
    """

    verifier_model = True
    questions = 3

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        scored = await sample_and_verify(ctx, ctx.samples)
        if not needs_feedback(ctx, scored):
            return RoundOutcome(scored)
        leader = rank(scored)[0]
        [questioned] = await ctx.verify([leader.draft], questions=self.questions)
        return RoundOutcome([replace(s, verification=questioned) if s is leader else s for s in scored])
