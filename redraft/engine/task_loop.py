"""One task's loop on an arbiter: the `RoundContext` a strategy is handed, and the rounds around it.

Every request the loop sends and every reply it gets crosses as encoded bytes, is
validated on decode, and is kept, in order, in ``frames``; the last frame is
always the task's `Result`. The loop keeps what its finished rounds established
on itself (the convergence protocol, the candidates seen, the memory), so a task
cut short by a timeout ends from the same state as one that stopped by itself.

The machinery's failures (`redraft.actors.failures`) are not the task's: they
leave the loop as `InfrastructureError` and the driver redoes the task. A redone
task gets the role replies of its earlier attempt's finished rounds (``replay``,
request frame -> reply frame): the loop sends the same requests again, since
every seed and revision is a function of the task and the replies before it, and
takes each answer from the replay instead of paying for it twice, on any node.
``pairs`` lists, for each reply in ``frames``, the request it answers, so the
finished rounds can be handed back as such a replay (`checkpoint`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from redraft.actors.failures import infrastructure_failure
from redraft.engine.pools import Reply, RolePool
from redraft.errors import AuthenticationError, describe, error_type
from redraft.protocols.convergence import Candidate, ConvergenceProtocol, Verdict
from redraft.protocols.messages import (
    Attempt,
    Critique,
    CritiqueRequest,
    Decision,
    Draft,
    DraftRequest,
    Issue,
    Reflection,
    ReflectRequest,
    Result,
    Revision,
    StageStep,
    StopLimit,
    Task,
    Usage,
    Verification,
    VerifyRequest,
    decode_as,
    encode,
)
from redraft.protocols.stages import Stage
from redraft.strategies import CriticRole, RoundOutcome, Scored, attempt_of, rank, revision_of

if TYPE_CHECKING:
    from redraft.engine.arbiter import Arbiter

R = TypeVar("R", bound=msgspec.Struct)


class TaskLoop:
    """One task's state; it is the `RoundContext` the strategy sees."""

    def __init__(self, arbiter: Arbiter, task: Task, replay: dict[bytes, bytes] | None = None) -> None:
        self.arbiter = arbiter
        self.task = task
        self.replay = replay or {}
        """Replies of an earlier attempt's finished rounds, by request frame."""
        self.pairs: list[tuple[int, int]] = []
        """(request index, reply index) in ``frames`` for every reply received."""
        self.sent = 0
        """How many frames `checkpoint` has handed out already."""
        self.waiting: list[Any] = []
        """The role members this task's calls are waiting on (a timeout's cut asks whether they still answer)."""
        self.round = 0
        self.samples = arbiter.samples
        self.revision: Revision | None = None
        self.threshold = arbiter.convergence.threshold
        self.final_round = False
        self.state: dict[str, Any] = {}
        self.frames: list[bytes] = []
        self.spent = Usage()
        self.by_role: dict[str, Usage] = {}
        self.unpriced: set[str] = set()
        # What the finished rounds established (read by `_finish`, also when a timeout cuts a round short).
        self.protocol = ConvergenceProtocol(arbiter.convergence)
        self.started = arbiter.clock()
        self.seen: dict[tuple[int, int], Scored] = {}
        """Every ranked candidate of the finished rounds, by (round, sample)."""
        self.initial: Scored | None = None
        self.memory: list[Attempt] = []
        self.error_type: str | None = None
        """The class of the exception that ended the task, when one did."""
        # Spread each task's samples over the pool, starting at a task-dependent member.
        self._offset = int.from_bytes(hashlib.blake2b(task.task_id.encode(), digest_size=2).digest(), "big")

    # ------------------------------------------------------------ RoundContext

    async def draft(self, n: int, *, stage: StageStep | None = None, revision: Revision | None = None) -> list[Draft]:
        # Stages of one round are distinct calls: the stage joins the seed, so each stage samples afresh.
        salt = f"{self.round}:{stage.name}" if stage is not None else self.round
        requests = [
            DraftRequest(
                task=self.task,
                round=self.round,
                sample=k,
                seed=self.seed(salt, k),
                revision=revision or self.revision,
                stage=stage,
                mode=self.arbiter.settings.revision_mode,
            )
            for k in range(n)
        ]
        return await self._exchange(
            requests, Draft, self.arbiter.roles.drafter, "draft", role="drafter", partial_ok=True
        )

    async def verify(self, drafts: list[Draft], *, stage: str | None = None, questions: int = 0) -> list[Verification]:
        requests = [VerifyRequest(task=self.task, draft=d, stage=stage, questions=questions) for d in drafts]
        return await self._exchange(requests, Verification, self.arbiter.roles.verifier, "verify", role="verifier")

    async def critique(
        self, drafts: list[Draft], *, role: CriticRole, stance: str, opponent: list[Issue] | None = None
    ) -> list[Critique]:
        pool = self.arbiter.roles.critic if role == "critic" else self.arbiter.roles.self_critic
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
        return await self._exchange(requests, Critique, pool, "critique", role=role, partial_ok=True)

    async def reflect(self, candidate: Scored) -> Reflection:
        failed = [c for c in candidate.verification.checks if not c.passed]
        request = ReflectRequest(
            task=self.task,
            draft=candidate.draft,
            failed_checks=failed,
            seed=self.seed(f"{self.round}:reflect", candidate.draft.sample),
        )
        [reflection] = await self._exchange(
            [request], Reflection, self.arbiter.roles.drafter, "reflect", role="drafter"
        )
        return reflection

    def stages(self) -> list[Stage]:
        return self.arbiter.stages(self.task.scenario)

    def seed(self, salt: int | str, sample: int) -> int:
        """The seed of one model call, by one rule for every seed: a hash of (run seed and repeat, task, salt, sample).

        ``salt`` is the round, with the stage or the role's step when one round makes
        several calls per sample (stages, critiques, reflections), so each samples afresh.
        """
        settings = self.arbiter.settings
        run = f"{settings.seed}" if not settings.repeat else f"{settings.seed}r{settings.repeat}"
        key = f"{run}/{self.task.task_id}/{salt}/{sample}".encode()
        return int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "big") & 0x7FFFFFFF

    async def _exchange(
        self,
        requests: Sequence[Any],
        kind: type[R],
        pool: RolePool,
        method: str,
        *,
        role: str,
        partial_ok: bool = False,
    ) -> list[R]:
        """Send requests at once, request k to ``pool`` member offset + k (one call per member); keep every
        frame; decode replies as ``kind``, priced as ``role``'s calls.

        With ``partial_ok``, failed calls are dropped as long as one succeeded (a
        lost sample or critique weakens a round, it does not end the task).
        """
        payloads = [encode(r) for r in requests]
        first = len(self.frames)
        self.frames.extend(payloads)
        replies: list[Reply | None] = [self.replay.get(p) for p in payloads]
        todo = [k for k, reply in enumerate(replies) if reply is None]
        if todo:
            sent = await pool.call_many(
                method, [payloads[k] for k in todo], [self._offset + k for k in todo], self.waiting
            )
            for k, answer in zip(todo, sent, strict=True):
                replies[k] = answer
        failures = [r for r in replies if isinstance(r, BaseException)]
        fatal: list[BaseException] = [f for f in failures if isinstance(f, AuthenticationError)]
        # The machinery's failure is never a lost sample: the task is redone whole, so it ends as it would have.
        fatal += [i for i in (infrastructure_failure(f, role=role) for f in failures) if i is not None]
        if fatal or (failures and (not partial_ok or len(failures) == len(replies))):
            raise (fatal or failures)[0]
        decoded: list[R] = []
        for k, reply in enumerate(replies):
            if not isinstance(reply, bytes):
                continue
            self.pairs.append((first + k, len(self.frames)))
            self.frames.append(reply)
            message = decode_as(reply, kind)  # type: ignore[type-var]
            if isinstance(message, Draft | Critique | Verification | Reflection) and message.usage.calls:
                self._account(role, message.model, message.usage, replayed=payloads[k] in self.replay)
            decoded.append(message)
        return decoded

    def _account(self, role: str, model: str, usage: Usage, *, replayed: bool = False) -> None:
        """Price one model call and add it to the task's totals, overall and by role (and to the metrics,
        unless an earlier attempt's reply was replayed: that call was counted when it was made)."""
        cost = self.arbiter.settings.prices.cost(model, usage)
        if cost is None:
            self.unpriced.add(model)
        priced = msgspec.structs.replace(usage, cost_usd=cost or 0.0)
        self.spent = self.spent + priced
        self.by_role[role] = self.by_role.get(role, Usage()) + priced
        if not replayed:
            self.arbiter.metrics.call(role, model, priced)

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        while await self.step():
            pass

    async def step(self) -> bool:
        """Play the next round; False once the task has its `Result` (the last frame).

        `InfrastructureError` (and refused credentials) leave the loop: they are not this task's failure.
        """
        arbiter, protocol = self.arbiter, self.protocol
        round_ = self.round = len(self.memory)
        self.final_round = round_ + 1 >= arbiter.convergence.max_rounds
        try:
            outcome: RoundOutcome = await arbiter.strategy.run_round(self)
            leader = rank(outcome.scored)[0]
        except AuthenticationError:
            raise  # every task would fail the same way: the driver stops the run
        except Exception as exc:
            failure = infrastructure_failure(exc)
            if failure is not None:
                raise failure from None  # the machinery's fault: the driver redoes the task
            self.error_type = error_type(exc)  # a backend or check failure ends this task only
            verdict = protocol.fail(describe(exc))
            self._decide(verdict, leader=None)
            self._finish(verdict)
            return False
        self.seen.update({(round_, s.draft.sample): s for s in outcome.scored})
        self.initial = self.initial or leader
        verdict = protocol.observe(
            Candidate(
                round=round_, sample=leader.draft.sample, text=leader.draft.text, score=leader.verification.score
            ),
            spent=self.spent,
            elapsed_s=arbiter.clock() - self.started,
            refused=bool(leader.draft.edit_errors) and not leader.draft.edits_applied,
        )
        self._decide(verdict, leader=leader)
        self.memory.append(attempt_of(leader, outcome.reflection))
        if verdict.action == "stop" or self.final_round:
            self._finish(verdict)
            return False
        assert verdict.best is not None
        best = self.seen[(verdict.best.round, verdict.best.sample)]
        self.revision = revision_of(best, self.memory[-arbiter.settings.memory :], outcome.scored)
        return True

    def checkpoint(self) -> tuple[list[bytes], list[tuple[int, int]]]:
        """The frames added since the last checkpoint, and the (request, reply) index pairs among them.

        Indices count from the task's first frame, so the driver can join checkpoints end to end.
        """
        start, self.sent = self.sent, len(self.frames)
        return self.frames[start:], [(q, a) for q, a in self.pairs if a >= start]

    def stop_early(self, limit: StopLimit, detail: str) -> None:
        """End the task now, mid-round (a timeout): stop with ``budget``, keeping the best of its finished rounds."""
        verdict = Verdict(action="stop", reason="budget", best=self.protocol.best, detail=detail, limit=limit)
        self._decide(verdict, leader=None)
        self._finish(verdict)

    def _finish(self, verdict: Verdict) -> None:
        """Append the task's `Result`: the best candidate of any finished round."""
        assert verdict.reason is not None
        final = self.seen.get((verdict.best.round, verdict.best.sample)) if verdict.best else None
        initial = self.initial
        self.frames.append(
            encode(
                Result(
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
                    wall_s=self.arbiter.clock() - self.started,
                    error=verdict.detail if verdict.reason == "error" else None,
                    usage_by_role=self.by_role,
                    unpriced_models=sorted(self.unpriced),
                    error_type=self.error_type if verdict.reason == "error" else None,
                    stop_limit=verdict.limit,
                    best_round=final.draft.round if final else -1,
                    best_sample=final.draft.sample if final else -1,
                    initial_sample=initial.draft.sample if initial else -1,
                )
            )
        )

    def _decide(self, verdict: Verdict, *, leader: Scored | None) -> None:
        best = verdict.best
        self.frames.append(
            encode(
                Decision(
                    task_id=self.task.task_id,
                    round=self.round,
                    action=verdict.action,
                    reason=verdict.reason,
                    best_round=best.round if best else -1,
                    best_sample=best.sample if best else -1,
                    best_score=best.score if best else 0.0,
                    round_best_score=leader.verification.score if leader else 0.0,
                    round_best_sample=leader.draft.sample if leader else -1,
                    rolled_back=verdict.rolled_back,
                    detail=verdict.detail,
                    limit=verdict.limit,
                )
            )
        )
