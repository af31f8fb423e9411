"""What every strategy shares: the round context it is handed, ranking, revisions, and the registry.

A strategy is a small object registered by name with `@strategy("name")`. The
arbiter owns the loop and the convergence protocol; each round it hands the
strategy a `RoundContext` whose methods call the roles (every call crossing as
typed bytes and landing in the trace), and the strategy returns what it
gathered. Adding a strategy is a registration, not an engine change; third
parties use the ``redraft.strategies`` entry-point group.

Ranking (`rank`) is shared by every strategy: verifier score first (hard
evidence outranks opinion), then agreement between samples (self-consistency),
then critic severity (fewer and milder issues first; the mean over critics when
several judged a candidate), then sample index. So is what a revision carries
(`revision_of`) and what the memory keeps of a round (`attempt_of`).
"""

from __future__ import annotations

import abc
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, Protocol

import msgspec

from redraft.errors import UserError
from redraft.plugins import Registry
from redraft.protocols.messages import (
    Attempt,
    CheckResult,
    Critique,
    Draft,
    Intent,
    Issue,
    PlanAsk,
    PlanVersion,
    Reflection,
    Result,
    Revision,
    StageStep,
    Stance,
    StepRun,
    StopReason,
    Task,
    Usage,
    Verification,
)
from redraft.protocols.stages import Stage
from redraft.strategies._escalation import Escalation

CriticRole = Literal["critic", "self_critic"]

SEVERITY_WEIGHT: dict[str, float] = {"critical": 3.0, "major": 2.0, "minor": 1.0}
"""How much an issue of each severity counts against a candidate when ranking ties."""


def severity(critique: Critique) -> float:
    """The weight of a critique's issues (0 for none, or for an unusable reply)."""
    return sum(SEVERITY_WEIGHT[issue.severity] for issue in critique.issues)


@dataclass(frozen=True)
class Scored:
    """One candidate of a round with everything the arbiter knows about it."""

    draft: Draft
    verification: Verification
    agreement: float
    critiques: tuple[Critique, ...] = ()
    """Every critique of this candidate (two in a debate); unusable ones carry an error and no issues."""

    @property
    def severity(self) -> float:
        return sum(severity(c) for c in self.critiques) / len(self.critiques) if self.critiques else 0.0

    @property
    def issues(self) -> list[Issue]:
        return [issue for c in self.critiques for issue in c.issues]

    @property
    def key(self) -> tuple[float, float, float, int]:
        return (self.verification.score, self.agreement, -self.severity, -self.draft.sample)


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


class Share(msgspec.Struct, frozen=True):
    """A batch's budget per task on average (``--calls-per-task``, ``--tokens-per-task`` or ``--usd-per-task``),
    for a strategy that spends to it: a task that stops under its share leaves the rest to tasks still failing."""

    amount: float
    unit: Literal["calls", "tokens", "usd"] = "calls"

    def spent(self, usage: Usage) -> float:
        """What ``usage`` spent of this budget: its calls, its tokens (prompt and answer), or its cost in USD
        (what the results rest on: a call the response cache answered costs what it cost when it was paid)."""
        if self.unit == "usd":
            return usage.cost_usd
        return float(usage.calls if self.unit == "calls" else usage.total_tokens)


class RoundContext(Protocol):
    """What the arbiter offers a strategy for one round of one task."""

    task: Task
    round: int
    samples: int
    revision: Revision | None
    """Built by the arbiter from the best candidate so far (None in round 0)."""
    threshold: float
    final_round: bool
    """No revision follows this round (the cycle limit)."""
    state: dict[str, Any]
    """The strategy's own memory for this task, kept across rounds (one strategy object serves many tasks)."""
    batch: str
    """Names the batch this task belongs to (a run, or one `redraft.refine` call): what a strategy that learns
    across the batch keys its shared statistics by."""
    spent: Usage
    """What the task has spent so far, every role's calls included."""
    share: Share | None
    """Each task's share of the batch's budget (``--calls-per-task``, ``--tokens-per-task`` or
    ``--usd-per-task``), for a strategy that spends to it; None: each task is bounded by the cycle limit alone."""
    escalation: Escalation | None
    """The stronger model a draft may be asked of (``--escalate``; an `Intent` whose action is ``escalate``
    routes it there), and what its call costs in the drafter's; None: the run has none."""

    async def draft(
        self,
        n: int,
        *,
        stage: StageStep | None = None,
        revision: Revision | None = None,
        fresh: bool = False,
        first: int = 0,
        intent: Intent | None = None,
        plan: PlanAsk | None = None,
    ) -> list[Draft]:
        """``n`` candidates in parallel, spread over the drafters (distinct seeds), samples ``first`` on.

        ``revision`` replaces the arbiter's own for this call (a stage refined in place); ``fresh`` drafts
        from the task alone, with no revision. ``first`` numbers the samples when a round drafts in several
        calls; ``intent`` says why they were asked for (it travels with each request, into the trace).
        ``plan`` asks for a plan, a step's program or a decision instead of an answer (each with a seed of its own).
        """
        ...

    async def verify(
        self, drafts: list[Draft], *, stage: str | None = None, questions: int = 0, step: StepRun | None = None
    ) -> list[Verification]:
        """The verifier's checks of each draft, in parallel: the stage's check if ``stage`` is set,
        plus up to ``questions`` chain-of-verification questions from the verifier's model; with ``step``,
        the draft run as that plan step's program, and what the run showed (`Verification.observation`)."""
        ...

    def record(self, message: PlanVersion | Draft) -> None:
        """Add a message of the strategy's own to the task's trace: a new version of its plan, or a candidate
        no single model call wrote (a plan's verified steps as one program)."""
        ...

    def progress(self) -> None:
        """The round has work worth keeping before it ends (a verified step): its replies so far are handed
        out as a checkpoint, so a task redone after a crash replays them instead of paying again."""
        ...

    async def critique(
        self, drafts: list[Draft], *, role: CriticRole, stance: Stance, opponent: list[Issue] | None = None
    ) -> list[Critique]:
        """A critique of each draft, in parallel (``opponent``: the other critic's last issues, in a debate)."""
        ...

    async def reflect(self, candidate: Scored) -> Reflection:
        """The drafter's model diagnoses why ``candidate`` failed its checks (Reflexion)."""
        ...

    def stages(self) -> list[Stage]:
        """The task's scenario's stages (its own, else the default outline, draft, polish)."""
        ...

    def priced(self, draft: Draft) -> Usage:
        """``draft``'s call, priced by the run's price table (what a budget in money counts of it)."""
        ...

    def seed(self, salt: int | str, sample: int) -> int:
        """A seed for a strategy's own random choices, by the rule every model call's seed follows."""
        ...


@dataclass
class RoundOutcome:
    """What a strategy gathered in one round."""

    scored: list[Scored]
    """The round's candidates for the answer (intermediate stages are not among them)."""
    reflection: str = ""
    """A diagnosis of the round's leader, kept in the memory later revisions see."""
    notes: list[str] = field(default_factory=list)
    tie_wins: bool = False
    """The round's leader replaces the best so far if it ties its score (the strategy ranked it above the best
    on agreement over every round: self-consistency across rounds)."""
    stop: tuple[StopReason, str] | None = None
    """The strategy ends the task after this round, with this reason and detail (its answer is settled:
    ``stable``; its share of the batch's budget is spent: ``budget``; no call is worth making:
    ``no_improvement``), unless the protocol stops it first."""


class Strategy(abc.ABC):
    """The rules of play of one round: subclass it, declare what differs from its defaults (a strategy that
    revises K samples, with no critic and no verifier model) and write `run_round`. The engine and the actor
    system read these declarations, never anything else of a strategy."""

    name: ClassVar[str]
    """Set by `@strategy("name")`."""
    revises: ClassVar[bool] = True
    """False for single-pass strategies: the task stops after round 0."""
    single_sample: ClassVar[bool] = False
    """True if the strategy ignores ``--samples`` and drafts one candidate."""
    critic_role: ClassVar[CriticRole | None] = None
    """Which critic the engine must start: a separate ``critic``, the drafter's own model, or none."""
    verifier_model: ClassVar[bool] = False
    """True if the verifier role needs a model (chain-of-verification questions)."""
    min_samples: ClassVar[int] = 1
    """Fewer ``--samples`` than this and the strategy cannot do what it is for (a majority of two): a run that
    gives fewer is warned, once."""
    shares_batch: ClassVar[bool] = False
    """True if the strategy learns across the batch and spends to its budget (``--calls-per-task`` or
    ``--tokens-per-task``): the actor system then starts its batch's `redraft.strategies.Ledger` before any
    task and rebuilds it on resume, and `finish` is told each task's result."""
    stops_itself: ClassVar[bool] = False
    """True if the strategy decides when a task has stopped paying (`RoundOutcome.stop`): the convergence
    protocol's heuristics (a repeated leader, ``stable``; ``--patience`` rounds without a better score,
    ``no_improvement``) are then off for it; the threshold, the budgets and the cycle limit still stop it."""
    executes_plans: ClassVar[bool] = False
    """True if the strategy runs a plan's steps over a task's files: it needs a scenario with a workspace."""

    @abc.abstractmethod
    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        """One round of the task: the calls it makes through ``ctx``, and what they gathered."""

    async def finish(self, ctx: RoundContext, result: Result) -> None:
        """Told once a task has its result (a strategy that shares a budget across tasks returns what the
        task left unspent); the default does nothing."""
        return None


STRATEGIES: Registry[Callable[[], Strategy]] = Registry("strategy", "redraft.strategies")
strategy = STRATEGIES.register
"""Register a strategy factory under a name: ``@strategy("name")``."""


def strategy_names() -> list[str]:
    return STRATEGIES.names()


def get_strategy(name: str) -> Strategy:
    """A new instance of the registered strategy ``name``; `UserError` listing the known ones otherwise, or
    naming a registration that makes anything but a `Strategy`."""
    made = STRATEGIES.get(name)()
    if not isinstance(made, Strategy):
        raise UserError(
            f"strategy {name!r} made a {type(made).__name__}, not a redraft.strategies.Strategy: subclass it"
        )
    return made


MAX_EDIT_FEEDBACK = 3
"""Refused patch edits of the latest round fed back, at most."""


def revision_of(best: Scored, memory: Sequence[Attempt] = (), latest: Sequence[Scored] = ()) -> Revision:
    """What the drafter is given to revise ``best``: its failed checks and critiques, its verification
    questions, the ``memory`` of earlier attempts, and the patch edits the ``latest`` round refused."""
    failed = [c for c in best.verification.checks if not c.passed]
    refused = dict.fromkeys(e for s in latest for e in s.draft.edit_errors)  # ordered, without repeats
    failed += [CheckResult(name="edit", passed=False, score=0.0, detail=e) for e in list(refused)[:MAX_EDIT_FEEDBACK]]
    return Revision(
        best_text=best.draft.text,
        best_score=best.verification.score,
        failed_checks=failed,
        issues=best.issues,
        memory=list(memory),
        questions=list(best.verification.questions),
    )


def attempt_of(leader: Scored, reflection: str = "") -> Attempt:
    """What the memory keeps of a round: its leader's answer, score and main failure (and a reflection)."""
    failed = [c.detail for c in leader.verification.checks if not c.passed]
    issues = leader.issues
    summary = failed[0] if failed else (issues[0].reason if issues else "passed every check")
    return Attempt(
        round=leader.draft.round,
        answer=leader.verification.answer,
        score=leader.verification.score,
        summary=summary[:200],
        reflection=reflection,
    )


def needs_feedback(ctx: RoundContext, scored: list[Scored]) -> bool:
    """Whether a revision will follow that can use more feedback on this round's candidates.

    Not on the last round, and not once the leader meets the threshold: no
    revision would read it, so its model calls would be wasted.
    """
    return not ctx.final_round and rank(scored)[0].verification.score < ctx.threshold


async def sample_and_verify(
    ctx: RoundContext, n: int, *, stage: StageStep | None = None, revision: Revision | None = None
) -> list[Scored]:
    """Draft ``n`` candidates and verify them: the first half of every round.

    The drafts of an intermediate stage are judged by its stage check; those of
    the last stage (or of no stage) by the scenario's own check.
    """
    drafts = await ctx.draft(n, stage=stage, revision=revision)
    verifications = await ctx.verify(drafts, stage=stage.name if stage is not None and not stage.final else None)
    agreements = agreement(verifications)
    return [Scored(d, v, a) for d, v, a in zip(drafts, verifications, agreements, strict=True)]


def attach(scored: list[Scored], critiques: list[Critique]) -> list[Scored]:
    """Each candidate with the critiques of it added."""
    return [
        replace(s, critiques=s.critiques + tuple(c for c in critiques if c.sample == s.draft.sample)) for s in scored
    ]


async def with_critiques(ctx: RoundContext, scored: list[Scored], role: CriticRole, stance: Stance) -> list[Scored]:
    """Critique the contenders for first place, when a revision will read it (`needs_feedback`).

    Only the contenders are critiqued: severity only ranks candidates tied on
    evidence and agreement, and the revision only needs the leader's critique.
    """
    if not needs_feedback(ctx, scored):
        return scored
    critiques = await ctx.critique([s.draft for s in contenders(scored)], role=role, stance=stance)
    return attach(scored, critiques)
