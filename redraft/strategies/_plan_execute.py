"""Plan, execute, observe, revise: a plan's steps run one at a time for real, each verified before the next.

The drafter's model writes a plan (numbered steps, each with its intent, the files it reads, the one file it
writes and that file's contract: columns, types, a row bound), recorded as a `PlanVersion` in the trace. Each
step's program then runs in the sandbox over the task's files and the verified outputs of earlier steps
(`RoundContext.verify` with a `StepRun`); what the run showed (exit, the end of stderr, the contract's checks,
a profile of the output: rows, each column's type and value patterns, a few rows) is what the next move sees:

- a step that fails is written again with what its run showed, up to ``step_attempts`` programs, then the model decides;
- after a verified step the model decides: ``continue``, ``retry`` a step, ``revise`` the plan (naming the step
  to redo: it and the steps reading its output are reset, the verified prefix is kept), or ``finish``;
- once every step is verified, their programs run together as one (the round's candidate), checked by the
  scenario's own feedback; if it fails, the model decides again with those checks.

A stall counter (moves with no newly verified step) ends a fruitless round; the convergence protocol's
usual reasons end the task, and the next round starts from the plan as it stands. Each verified step is
checkpointed (`RoundContext.progress`): a task redone after a crash replays up to its last verified step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import msgspec

from redraft.protocols.messages import (
    CheckResult,
    Draft,
    Observation,
    PlanAsk,
    PlanAskKind,
    PlanStep,
    PlanVersion,
    StepRun,
    StopReason,
)
from redraft.strategies._base import RoundContext, RoundOutcome, Scored, Strategy, strategy
from redraft.strategies._plan_state import (
    DecisionReply,
    PlanState,
    Verified,
    bare,
    diff,
    read_decision,
    read_plan,
    steps_of,
)

FALLBACK = "the plan could not be read: one step that writes the final output"
FINAL_OUTPUT = "output.csv"
"""What the one step of a fallback plan writes: the final output of the scenarios that have files (pipeline)."""


@strategy("plan_execute")
class PlanExecute(Strategy):
    """Plan, then execute each step in the sandbox, observe, and continue, retry, revise or finish."""

    single_sample: ClassVar[bool] = True
    executes_plans: ClassVar[bool] = True
    step_attempts = 2
    """Programs written for one step before the model is asked what to do."""
    stall_limit = 6
    """Moves (model calls) in a row with no newly verified step that end a round."""
    max_moves = 24
    """Model calls in one round at most."""

    async def run_round(self, ctx: RoundContext) -> RoundOutcome:
        state: PlanState = ctx.state.setdefault("plan", PlanState())
        turn = _Turn(ctx, state, self)
        if not state.steps:
            await turn.make_plan()
        elif state.final_checks:  # the last round's program failed the scenario's checks
            await turn.decide(None, None, state.final_checks)
        while not turn.over():
            step = state.next_step()
            if step is None:
                scored = await turn.whole()
                if scored.verification.passed or turn.over():
                    return turn.outcome(scored)
                await turn.decide(None, None, [c for c in scored.verification.checks if not c.passed])
                if state.next_step() is None:  # the model kept the plan as it is: nothing left to run
                    return turn.outcome(scored)
                continue
            await turn.execute(step)
        return turn.outcome(await turn.whole())


class _Turn:
    """One round of one task's plan: the moves it made, and the stall counter."""

    def __init__(self, ctx: RoundContext, state: PlanState, rules: PlanExecute) -> None:
        self.ctx, self.state, self.rules = ctx, state, rules
        self.moves = 0
        self.stalled = 0
        self.finished = False
        self.notes: list[str] = []

    def over(self) -> bool:
        return self.finished or self.stalled >= self.rules.stall_limit or self.moves >= self.rules.max_moves

    async def ask(self, ask: PlanAsk) -> Draft:
        self.moves += 1
        [draft] = await self.ctx.draft(1, fresh=True, plan=ask)
        return draft

    def asking(
        self, kind: PlanAskKind, step: int | None = None, *, checks: Sequence[CheckResult] = (), code: str = ""
    ) -> PlanAsk:
        """An ask about the plan as it stands, with what its verified steps produced."""
        state = self.state
        return PlanAsk(
            kind=kind,
            steps=list(state.steps),
            step=step,
            verified=state.verified_numbers(),
            observations=state.observations(),
            checks=list(checks),
            code=code,
        )

    async def make_plan(self) -> None:
        steps = None
        for _ in range(2):  # a reply that is no plan is asked for once more
            steps = read_plan((await self.ask(self.asking("plan"))).text)
            if steps is not None:
                break
            self.stalled += 1
        if steps is None:
            steps = [PlanStep(number=1, intent="do the whole task", output=FINAL_OUTPUT)]
            self.notes.append(FALLBACK)
        self.revise(steps, "the first plan" if not self.notes else FALLBACK, None, None)

    async def execute(self, step: PlanStep) -> None:
        """Write and run one step's program; keep it if it passes its contract, else count the failure."""
        state = self.state
        code, seen, checks = state.failure.get(step.number, ("", None, []))  # the last failed attempt, if any
        ask = self.asking("step", step.number, code=code, checks=checks)
        if seen is not None:
            ask = msgspec.structs.replace(ask, observations=[*ask.observations, bare(seen)])
        draft = await self.ask(ask)
        [checked] = await self.ctx.verify([draft], step=StepRun(step=step, files=state.carried(step)))
        observation = checked.observation
        if checked.passed and observation is not None:
            state.verified[step.output] = Verified(step=step, observation=observation)
            state.failure.pop(step.number, None)
            self.stalled = 0
            self.ctx.progress()
            if state.next_step() is not None:  # the last step's decision comes with the whole program's checks
                await self.decide(step, observation, [])
            return
        self.stalled += 1
        state.tries[step.number] = state.tries.get(step.number, 0) + 1
        failed_checks = [c for c in checked.checks if not c.passed]
        state.failure[step.number] = (observation.program if observation else draft.text, observation, failed_checks)
        if state.tries[step.number] >= self.rules.step_attempts and not self.over():
            state.tries[step.number] = 0
            await self.decide(step, observation, failed_checks)

    async def decide(self, step: PlanStep | None, observation: Observation | None, checks: list[CheckResult]) -> None:
        """Ask the model what to do after ``step`` ran (None: after the whole program ran) and do it."""
        ask = self.asking("decide", step.number if step else None, checks=checks)
        if observation is not None and observation.step not in ask.verified:  # a verified one is there already
            ask = msgspec.structs.replace(ask, observations=[*ask.observations, bare(observation)])
        reply = read_decision((await self.ask(ask)).text)
        if reply is None:
            self.notes.append("a decision could not be read: the plan goes on as it stands")
            self.stalled += 1
            return
        self.apply(reply, step, observation)

    def apply(self, reply: DecisionReply, step: PlanStep | None, observation: Observation | None) -> None:
        state = self.state
        reason = " ".join(reply.reason.split())[:300] or reply.action
        if reply.action == "finish":
            self.finished = True
            return
        if reply.action == "continue":
            return
        self.stalled += 1
        redo = next((s for s in state.steps if s.number == reply.redo), step or state.steps[-1])
        steps = steps_of(reply.steps) if reply.action == "revise" and reply.steps else None
        state.reset({redo.output})
        if reply.action == "revise" or steps is not None:
            self.revise(steps or list(state.steps), reason, step.number if step else None, observation)

    def revise(self, steps: list[PlanStep], reason: str, trigger: int | None, observation: Observation | None) -> None:
        """Adopt ``steps`` as the plan's next version and record it (its diff from the last, what is kept)."""
        state = self.state
        old, state.steps = state.steps, steps
        state.reset({s.output for s in steps if not state.is_verified(s)})
        state.version += 1
        added, removed, changed = diff(old, steps) if old else ([s.number for s in steps], [], [])
        self.ctx.record(
            PlanVersion(
                task_id=self.ctx.task.task_id,
                round=self.ctx.round,
                version=state.version,
                reason=reason,
                steps=steps,
                trigger_step=trigger,
                observation=bare(observation) if observation else None,
                added=added,
                removed=removed,
                changed=changed,
                kept=state.verified_numbers(),
            )
        )

    async def whole(self) -> Scored:
        """The verified steps' programs run together, checked by the scenario: the round's candidate."""
        state, ctx = self.state, self.ctx
        text = state.program()
        draft = Draft(task_id=ctx.task.task_id, round=ctx.round, sample=0, text=text or "# no step was verified\n")
        ctx.record(draft)  # the round's candidate: no model wrote it as a whole, the verified steps did
        [checked] = await ctx.verify([draft])
        state.final_checks = [] if checked.passed else [c for c in checked.checks if not c.passed]
        return Scored(draft, checked, 1.0)

    def outcome(self, scored: Scored) -> RoundOutcome:
        stop: tuple[StopReason, str] | None = None
        if self.finished:
            stop = ("stable", "the drafter finished the plan")
        notes = list(self.notes)
        if self.stalled >= self.rules.stall_limit:
            notes.append(f"stalled after {self.stalled} moves with no newly verified step")
        return RoundOutcome([scored], notes=notes, stop=stop)
