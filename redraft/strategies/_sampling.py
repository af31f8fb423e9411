"""Strategies that sample and pick, with no revision: the baselines every other one is compared with."""

from __future__ import annotations

from dataclasses import replace

from redraft.strategies._base import RoundContext, RoundOutcome, Strategy, sample_and_verify, strategy


@strategy("none")
class SinglePass(Strategy):
    """One draft, verified; no critic, no revision. The floor every strategy is compared with."""

    revises = False
    single_sample = True

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        return RoundOutcome(await sample_and_verify(ctx, 1))


@strategy("self_consistency")
class SelfConsistency(Strategy):
    """K samples in one round; the arbiter picks by evidence, then majority answer (Wang et al. 2022).

    Self-consistency: sample several reasoning paths and keep the answer most of
    them agree on. Here hard evidence comes first (a verified answer beats a
    popular one), and agreement breaks ties among equally scored candidates.
    """

    revises = False
    min_samples = 3  # a majority needs three voices

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        return RoundOutcome(await sample_and_verify(ctx, ctx.samples))


@strategy("best_of_n")
class BestOfN(Strategy):
    """N samples in one round; the arbiter picks by verifier score alone: the compute-matched baseline.

    Best-of-N (rejection sampling against a verifier, as in Cobbe et al. 2021):
    spend the whole budget on independent samples and keep the one the
    verifier scores highest, ties going to the lowest sample. Set ``--samples``
    to the model calls another strategy spends per task to compare at equal
    compute: a refinement strategy that cannot beat it is not worth its rounds.
    """

    revises = False

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        scored = await sample_and_verify(ctx, ctx.samples)
        return RoundOutcome([replace(s, agreement=0.0) for s in scored])  # the verifier alone decides
