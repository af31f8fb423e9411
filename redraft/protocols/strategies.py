"""Critic strategies: which roles act in a round, in what order, how often.

A strategy is a small object registered by name with `@strategy("name")`. The
arbiter owns the loop and the convergence protocol; each round it hands the
strategy a `RoundContext` whose methods call the roles (every call crossing as
typed bytes and landing in the trace), and the strategy returns what it
gathered. Adding a strategy is a registration, not an engine change; third
parties use the ``redraft.strategies`` entry-point group.

Ranking (`rank`) is shared by every strategy: verifier score first (hard
evidence outranks opinion), then agreement between samples (self-consistency),
then critic severity (fewer and milder issues first), then sample index.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from redraft.plugins import Registry
from redraft.protocols.messages import Critique, Draft, Revision, Task, Verification

CriticRole = Literal["critic", "self_critic"]


@dataclass(frozen=True)
class Scored:
    """One candidate of a round with everything the arbiter knows about it."""

    draft: Draft
    verification: Verification
    agreement: float
    critique: Critique | None = None

    @property
    def key(self) -> tuple[float, float, float, int]:
        severity = self.critique.severity if self.critique is not None else 0.0
        return (self.verification.score, self.agreement, -severity, -self.draft.sample)


def agreement(verifications: list[Verification]) -> list[float]:
    """For each sample, the share of the round's samples giving the same answer (0 if none)."""
    counts = Counter(v.answer for v in verifications if v.answer is not None)
    n = len(verifications)
    return [counts[v.answer] / n if v.answer is not None and n else 0.0 for v in verifications]


def rank(scored: list[Scored]) -> list[Scored]:
    """Best first, by (verifier score, agreement, -critic severity, -sample)."""
    return sorted(scored, key=lambda s: s.key, reverse=True)


MAX_CONTENDERS = 2
"""Critiques per round at most: each costs a model call, and when all K answers
differ every sample ties; the critic separates the top two."""


def contenders(scored: list[Scored]) -> list[Scored]:
    """Up to `MAX_CONTENDERS` candidates tied for first on (verifier score, agreement)."""
    ranked = rank(scored)
    top = ranked[0].key[:2]
    return [s for s in ranked if s.key[:2] == top][:MAX_CONTENDERS]


class RoundContext(Protocol):
    """What the arbiter offers a strategy for one round of one task."""

    task: Task
    round: int
    samples: int
    revision: Revision | None
    threshold: float
    final_round: bool
    """No revision follows this round (the cycle limit)."""

    async def draft(self, n: int) -> list[Draft]:
        """``n`` candidates in parallel, spread over the drafters (distinct seeds)."""
        ...

    async def verify(self, drafts: list[Draft]) -> list[Verification]:
        """The verifier's checks of each draft, in parallel."""
        ...

    async def critique(self, drafts: list[Draft], *, role: CriticRole, stance: str) -> list[Critique]:
        """A critique of each draft, in parallel."""
        ...


@dataclass
class RoundOutcome:
    """What a strategy gathered in one round."""

    scored: list[Scored]
    notes: list[str] = field(default_factory=list)


class Strategy(Protocol):
    name: str
    revises: bool
    """False for single-pass strategies: the task stops after round 0."""
    single_sample: bool
    """True if the strategy ignores ``--samples`` and drafts one candidate."""
    critic_role: CriticRole | None
    """Which critic the engine must start: a separate ``critic``, the drafter's own model, or none."""

    async def run_round(self, ctx: RoundContext) -> RoundOutcome: ...


STRATEGIES: Registry[Callable[[], Strategy]] = Registry("strategy", "redraft.strategies")
strategy = STRATEGIES.register
"""Register a strategy factory under a name: ``@strategy("name")``."""


def strategy_names() -> list[str]:
    return STRATEGIES.names()


def get_strategy(name: str) -> Strategy:
    """A new instance of the registered strategy ``name``; `UserError` listing the known ones otherwise."""
    return STRATEGIES.get(name)()


async def sample_and_verify(ctx: RoundContext, n: int) -> list[Scored]:
    """Draft ``n`` candidates and verify them: the first half of every round."""
    drafts = await ctx.draft(n)
    verifications = await ctx.verify(drafts)
    agreements = agreement(verifications)
    return [Scored(d, v, a) for d, v, a in zip(drafts, verifications, agreements, strict=True)]


async def with_critiques(ctx: RoundContext, scored: list[Scored], role: CriticRole, stance: str) -> list[Scored]:
    """Critique the contenders for first place, unless no revision can use it.

    Only the contenders are critiqued: severity only ranks candidates tied on
    evidence and agreement, and the revision only needs the leader's critique.
    Nothing is critiqued when the leader already meets the threshold or the
    round is the last: no revision would read the critique.
    """
    if ctx.final_round or rank(scored)[0].verification.score >= ctx.threshold:
        return scored
    tied = contenders(scored)
    critiques = await ctx.critique([s.draft for s in tied], role=role, stance=stance)
    by_sample = {c.sample: c for c in critiques}
    return [Scored(s.draft, s.verification, s.agreement, by_sample.get(s.draft.sample, s.critique)) for s in scored]


@strategy("none")
class SinglePass:
    """One draft, verified; no critic, no revision. The floor every strategy is compared with."""

    name = "none"
    revises = False
    single_sample = True
    critic_role: CriticRole | None = None

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        return RoundOutcome(await sample_and_verify(ctx, 1))


@strategy("self_consistency")
class SelfConsistency:
    """K samples in one round; the arbiter picks by evidence, then majority answer (Wang et al. 2022)."""

    name = "self_consistency"
    revises = False
    single_sample = False
    critic_role: CriticRole | None = None

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        return RoundOutcome(await sample_and_verify(ctx, ctx.samples))


@strategy("self_refine")
class SelfRefine:
    """The drafter's own model critiques its answer, then revises it (Madaan et al. 2023)."""

    name = "self_refine"
    revises = True
    single_sample = False
    critic_role: CriticRole | None = "self_critic"

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        scored = await sample_and_verify(ctx, ctx.samples)
        return RoundOutcome(await with_critiques(ctx, scored, "self_critic", "self"))


@strategy("adversarial")
class Adversarial:
    """A separate critic, told to find concrete faults, attacks the contenders; the drafter revises."""

    name = "adversarial"
    revises = True
    single_sample = False
    critic_role: CriticRole | None = "critic"

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        scored = await sample_and_verify(ctx, ctx.samples)
        return RoundOutcome(await with_critiques(ctx, scored, "critic", "adversarial"))
