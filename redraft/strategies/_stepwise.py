"""Top-down refinement: outline, then draft, then polish, each stage verified before the next."""

from __future__ import annotations

from redraft.protocols.messages import Revision, StageStep
from redraft.strategies._base import (
    RoundContext,
    RoundOutcome,
    Scored,
    Strategy,
    rank,
    revision_of,
    sample_and_verify,
    strategy,
)


@strategy("stepwise")
class Stepwise(Strategy):
    """Outline, then draft, then polish; each stage is verified before the next, a failed one refined in place.

    The plan-then-solve pattern (Plan-and-Solve, Wang et al. 2023; least-to-most,
    Zhou et al. 2023) with a check at every step. The stages are the scenario's
    own (`Scenario.stages`) or outline, draft, polish. In round 0 each stage
    but the last is drafted and checked (`check_stage`); a stage that fails is
    redrafted with its failed checks, up to `stage_attempts` times, without
    redoing the stages already verified, and the best attempt is kept. The
    last stage is the answer, checked by the scenario. Later rounds revise only
    the last stage, on top of the verified earlier ones.
    """

    stage_attempts = 3

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        stages = ctx.stages()
        verified: str | None = ctx.state.get("verified")
        if verified is None:  # round 0: build the intermediate stages once
            verified = ""
            for index in range(len(stages) - 1):
                verified = await self._stage(ctx, self._step(ctx, index, verified))
            ctx.state["verified"] = verified
        final = self._step(ctx, len(stages) - 1, verified)
        return RoundOutcome(await sample_and_verify(ctx, ctx.samples, stage=final))

    @staticmethod
    def _step(ctx: RoundContext, index: int, previous: str) -> StageStep:
        stage = ctx.stages()[index]
        total = len(ctx.stages())
        return StageStep(name=stage.name, index=index, total=total, instruction=stage.instruction, previous=previous)

    async def _stage(self, ctx: RoundContext, step: StageStep) -> str:
        """Draft one intermediate stage until it passes its check; its best output."""
        best: Scored | None = None
        revision: Revision | None = None
        for _ in range(self.stage_attempts):
            leader = rank(await sample_and_verify(ctx, ctx.samples, stage=step, revision=revision))[0]
            if best is None or leader.verification.score > best.verification.score:
                best = leader
            if leader.verification.passed:
                return leader.draft.text
            revision = revision_of(best)
        assert best is not None
        return best.draft.text  # never verified: the final stage's own check will judge the result
