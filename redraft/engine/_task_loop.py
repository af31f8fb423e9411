"""One task's loop on an arbiter: the `RoundContext` a strategy is handed, and the rounds around it.

Every request the loop sends and every reply it gets is kept, in order, in
``trace``; the last message is always the task's `Result`. The loop keeps what its
finished rounds established on itself (the convergence protocol, the candidates
seen, the memory), so a task cut short by a timeout ends from the same state as
one that stopped by itself.

The machinery's failures (`redraft.errors.machinery_failure`) are not the task's:
they leave the loop as `InfrastructureError` and the driver redoes the task. A
redone task gets the role replies of its earlier attempt's finished rounds
(``replay``, request -> reply): the loop sends the same requests again, since
every seed and revision is a function of the task and the replies before it, and
takes each answer from the replay instead of paying for it twice, on any node.
``pairs`` lists, for each reply in ``trace``, the request it answers, so the
finished rounds can be handed back as such a replay (`checkpoint`).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any, TypeVar

import msgspec

from redraft.engine._failures import empty_draft, raise_failures
from redraft.engine._rules import Rules
from redraft.engine.pools import Member, Outcome, Reply, Request, RolePool
from redraft.errors import (
    AuthenticationError,
    CheckError,
    ProtocolError,
    cause_of,
    describe,
    error_type,
    machinery_failure,
)
from redraft.protocols.convergence import Candidate, ConvergenceProtocol, Verdict
from redraft.protocols.messages import (
    Attempt,
    Critique,
    CritiqueRequest,
    Decision,
    Draft,
    DraftRequest,
    Intent,
    Issue,
    Message,
    PlanAsk,
    PlanVersion,
    Reflection,
    ReflectRequest,
    Result,
    Revision,
    RoleName,
    StageStep,
    Stance,
    StepRun,
    StopLimit,
    Task,
    Usage,
    Verification,
    VerifyRequest,
)
from redraft.protocols.stages import Stage
from redraft.strategies import CriticRole, RoundOutcome, Scored, attempt_of, rank, revision_of

R = TypeVar("R", bound=Reply)
Replay = Sequence[tuple[Request, Reply]]
"""The replies an earlier attempt of a task received in its finished rounds, each with its request."""


class TaskLoop:
    """One task's state; it is the `RoundContext` the strategy sees."""

    def __init__(self, rules: Rules, task: Task, replay: Replay = ()) -> None:
        self.rules = rules
        self.task = task
        self.replay = list(replay)
        """Replies of an earlier attempt's finished rounds, with their requests."""
        self.pairs: list[tuple[int, int]] = []
        """(request index, reply index) in ``trace`` for every reply received."""
        self.sent = 0
        """How many messages `checkpoint` has handed out already."""
        self.waiting: list[Member] = []
        """The role members this task's calls are waiting on (a timeout's cut asks whether they still answer)."""
        self.round = 0
        self.samples = rules.settings.samples
        self.revision: Revision | None = None
        self.threshold = rules.settings.convergence.threshold
        self.final_round = False
        self.state: dict[str, Any] = {}
        self.batch = rules.settings.batch
        self.share = rules.settings.share
        self.escalation = rules.settings.escalation
        self.trace: list[Message] = [task]
        self.spent = Usage()
        self.by_role: dict[str, Usage] = {}
        """Usage by `RoleName` (keys as `Result.usage_by_role` has them)."""
        self.unpriced: set[str] = set()
        # What the finished rounds established (read by `_finish`, also when a timeout cuts a round short).
        self.protocol = ConvergenceProtocol(rules.settings.convergence)
        self.started = rules.clock()
        self.seen: dict[tuple[int, int], Scored] = {}
        """Every ranked candidate of the finished rounds, by (round, sample)."""
        self.initial: Scored | None = None
        self.memory: list[Attempt] = []
        self.error_type: str | None = None
        """The class of the exception that ended the task, when one did."""
        self.check_error: CheckError | None = None
        """The check's failure that ended the task, when that is what did."""
        self.progressed = asyncio.Event()
        """Set by `progress`: the round has work worth keeping before it ends (the arbiter checkpoints it)."""
        self._plan_asks = 0
        """Plan asks of this round so far: each samples with a seed of its own."""
        # Spread each task's samples over the pool, starting at a task-dependent member.
        self._offset = int.from_bytes(hashlib.blake2b(task.task_id.encode(), digest_size=2).digest(), "big")

    # ------------------------------------------------------------ RoundContext

    def priced(self, draft: Draft) -> Usage:
        return self.rules.settings.prices.priced(draft.model, draft.usage)

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
        # Stages of one round are distinct calls: the stage joins the seed, so each stage samples afresh.
        salt: int | str = f"{self.round}:{stage.name}" if stage is not None else self.round
        if plan is not None:  # and so does every ask of a plan
            self._plan_asks += 1
            salt = f"{self.round}:plan:{self._plan_asks}"
        requests = [
            DraftRequest(
                task=self.task,
                round=self.round,
                sample=k,
                seed=self.seed(salt, k),
                revision=None if fresh else revision or self.revision,
                stage=stage,
                mode=self.rules.settings.revision_mode,
                intent=intent,
                plan=plan,
            )
            for k in range(first, first + n)
        ]
        return await self._exchange(requests, Draft, self.rules.roles.drafter, partial_ok=True)

    async def verify(
        self, drafts: list[Draft], *, stage: str | None = None, questions: int = 0, step: StepRun | None = None
    ) -> list[Verification]:
        requests = [VerifyRequest(task=self.task, draft=d, stage=stage, questions=questions, step=step) for d in drafts]
        return await self._exchange(requests, Verification, self.rules.roles.verifier)

    def record(self, message: PlanVersion | Draft) -> None:
        self.trace.append(message)

    def progress(self) -> None:
        self.progressed.set()

    async def critique(
        self, drafts: list[Draft], *, role: CriticRole, stance: Stance, opponent: list[Issue] | None = None
    ) -> list[Critique]:
        pool = self.rules.roles.critic if role == "critic" else self.rules.roles.self_critic
        if pool is None:
            raise RuntimeError(f"strategy asked for a {role} but none was started")
        requests = [
            CritiqueRequest(
                task=self.task,
                draft=d,
                stance=stance,
                opponent=opponent or [],
                seed=self.seed(f"{self.round}:critique:{stance}", d.sample),
            )
            for d in drafts
        ]
        return await self._exchange(requests, Critique, pool, partial_ok=True)

    async def reflect(self, candidate: Scored) -> Reflection:
        failed = [c for c in candidate.verification.checks if not c.passed]
        request = ReflectRequest(
            task=self.task,
            draft=candidate.draft,
            failed_checks=failed,
            seed=self.seed(f"{self.round}:reflect", candidate.draft.sample),
        )
        [reflection] = await self._exchange([request], Reflection, self.rules.roles.drafter)
        return reflection

    def stages(self) -> list[Stage]:
        return self.rules.stages(self.task.scenario)

    def seed(self, salt: int | str, sample: int) -> int:
        """The seed of one model call, by one rule for every seed: a hash of (run seed and repeat, task, salt, sample).

        ``salt`` is the round, with the stage or the role's step when one round makes
        several calls per sample (stages, critiques, reflections), so each samples afresh.
        """
        settings = self.rules.settings
        run = f"{settings.seed}" if not settings.repeat else f"{settings.seed}r{settings.repeat}"
        key = f"{run}/{self.task.task_id}/{salt}/{sample}".encode()
        return int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "big") & 0x7FFFFFFF

    async def _exchange(
        self, requests: Sequence[Request], kind: type[R], pool: RolePool, *, partial_ok: bool = False
    ) -> list[R]:
        """Send requests at once, request k to ``pool`` member offset + k (one call per member); keep every
        message; each reply must be a ``kind``, priced as the pool's role's calls.

        With ``partial_ok``, failed calls are dropped as long as one succeeded (a
        lost sample or critique weakens a round, it does not end the task).
        """
        first = len(self.trace)
        self.trace.extend(requests)
        outcomes: list[Outcome | None] = [self._replayed(r) for r in requests]
        todo = [k for k, outcome in enumerate(outcomes) if outcome is None]
        if todo:
            sent = await pool.call_many([requests[k] for k in todo], [self._offset + k for k in todo], self.waiting)
            for k, got in zip(todo, sent, strict=True):
                outcomes[k] = got
        for k, outcome in enumerate(outcomes):
            if (empty := empty_draft(outcome)) is not None:
                assert isinstance(outcome, Draft)
                self._account(pool.role, outcome.model, outcome.usage, replayed=k not in todo)  # paid, kept
                outcomes[k] = empty
        raise_failures(outcomes, pool.role, partial_ok=partial_ok)
        replies: list[R] = []
        for k, outcome in enumerate(outcomes):
            if isinstance(outcome, BaseException) or outcome is None:
                continue
            if not isinstance(outcome, kind):
                raise ProtocolError(f"expected a `{_tag(kind)}` reply, got `{_tag(type(outcome))}`")
            self.pairs.append((first + k, len(self.trace)))
            self.trace.append(outcome)
            if isinstance(outcome, Draft | Critique | Verification | Reflection) and outcome.usage.calls:
                self._account(pool.role, outcome.model, outcome.usage, replayed=k not in todo)
            replies.append(outcome)
        return replies

    def _replayed(self, request: Request) -> Reply | None:
        """The reply an earlier attempt received for an equal request, if any."""
        return next((reply for asked, reply in self.replay if asked == request), None)

    def _account(self, role: RoleName, model: str, usage: Usage, *, replayed: bool = False) -> None:
        """Price one model call and add it to the task's totals, overall and by role (and to the metrics,
        unless an earlier attempt's reply was replayed: that call was counted when it was made)."""
        prices = self.rules.settings.prices
        if not prices.known(model):
            self.unpriced.add(model)
        priced = prices.priced(model, usage)
        self.spent = self.spent + priced
        self.by_role[role] = self.by_role.get(role, Usage()) + priced
        if not replayed:
            self.rules.on_call(role, model, priced)

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        while await self.step():
            pass

    async def step(self) -> bool:
        """Play the next round; False once the task has its `Result` (the last frame).

        `InfrastructureError` (and refused credentials) leave the loop: they are not this task's failure.
        """
        rules, protocol = self.rules, self.protocol
        round_ = self.round = len(self.memory)
        self._plan_asks = 0
        self.final_round = round_ + 1 >= rules.settings.convergence.max_rounds
        try:
            outcome: RoundOutcome = await rules.strategy.run_round(self)
            leader = rank(outcome.scored)[0]
        except AuthenticationError:
            raise  # every task would fail the same way: the driver stops the run
        except Exception as exc:
            failure = machinery_failure(exc)
            if failure is not None:
                raise failure from None  # the machinery's fault: the driver redoes the task
            self.error_type = error_type(exc)  # a backend or check failure ends this task only
            self.check_error = cause if isinstance(cause := cause_of(exc), CheckError) else None
            verdict = protocol.fail(describe(exc))
            self._decide(verdict, leader=None)
            await self._finish(verdict)
            return False
        self.seen.update({(round_, s.draft.sample): s for s in outcome.scored})
        self.initial = self.initial or leader
        verdict = protocol.observe(
            Candidate(
                round=round_, sample=leader.draft.sample, text=leader.draft.text, score=leader.verification.score
            ),
            spent=self.spent,
            elapsed_s=rules.clock() - self.started,
            refused=bool(leader.draft.edit_errors) and not leader.draft.edits_applied,
            tie_wins=outcome.tie_wins,
        )
        if verdict.action == "continue" and outcome.stop is not None:
            reason, detail = outcome.stop
            verdict = msgspec.structs.replace(verdict, action="stop", reason=reason, detail=detail)
        self._decide(verdict, leader=leader)
        self.memory.append(attempt_of(leader, outcome.reflection))
        if verdict.action == "stop" or self.final_round:
            await self._finish(verdict)
            return False
        assert verdict.best is not None
        best = self.seen[(verdict.best.round, verdict.best.sample)]
        self.revision = revision_of(best, self.memory[-rules.settings.memory :], outcome.scored)
        return True

    def checkpoint(self) -> tuple[list[Message], list[tuple[int, int]]]:
        """The messages added since the last checkpoint, and the (request, reply) index pairs among them.

        Indices count from the task's first message, so the driver can join checkpoints end to end.
        """
        start, self.sent = self.sent, len(self.trace)
        return self.trace[start:], [(q, a) for q, a in self.pairs if a >= start]

    async def stop_early(self, limit: StopLimit, detail: str) -> None:
        """End the task now, mid-round (a timeout): stop with ``budget``, keeping the best of its finished rounds."""
        verdict = Verdict(action="stop", reason="budget", best=self.protocol.best, detail=detail, limit=limit)
        self._decide(verdict, leader=None)
        await self._finish(verdict)

    async def _finish(self, verdict: Verdict) -> None:
        """Append the task's `Result` (the best candidate of any finished round) and tell the strategy."""
        result = self._result(verdict)
        self.trace.append(result)
        await self.rules.strategy.finish(self, result)

    def _result(self, verdict: Verdict) -> Result:
        assert verdict.reason is not None
        final = self.seen.get((verdict.best.round, verdict.best.sample)) if verdict.best else None
        initial = self.initial
        return Result(
            task_id=self.task.task_id,
            scenario=self.task.scenario,
            answer=final.verification.answer if final else None,
            text=final.draft.text if final else "",
            score=final.verification.score if final else 0.0,
            passed=final.verification.passed if final else False,
            initial_score=initial.verification.score if initial else 0.0,
            initial_passed=initial.verification.passed if initial else False,
            rounds=len(self.memory),
            stop_reason=verdict.reason,
            usage=self.spent,
            wall_s=self.rules.clock() - self.started,
            error=verdict.detail if verdict.reason == "error" else None,
            usage_by_role=self.by_role,
            unpriced_models=sorted(self.unpriced),
            error_type=self.error_type if verdict.reason == "error" else None,
            stop_limit=verdict.limit,
            error_raised=self.check_error.raised if self.check_error else None,
            error_where=self.check_error.where if self.check_error else None,
            traceback=self.check_error.trace if self.check_error else None,
            best_round=final.draft.round if final else None,
            best_sample=final.draft.sample if final else None,
            initial_sample=initial.draft.sample if initial else None,
        )

    def _decide(self, verdict: Verdict, *, leader: Scored | None) -> None:
        best = verdict.best
        self.trace.append(
            Decision(
                task_id=self.task.task_id,
                round=self.round,
                action=verdict.action,
                reason=verdict.reason,
                best_round=best.round if best else None,
                best_sample=best.sample if best else None,
                best_score=best.score if best else 0.0,
                round_best_score=leader.verification.score if leader else 0.0,
                round_best_sample=leader.draft.sample if leader else None,
                rolled_back=verdict.rolled_back,
                detail=verdict.detail,
                limit=verdict.limit,
            )
        )


def _tag(kind: type[msgspec.Struct]) -> str:
    return str(kind.__struct_config__.tag)
