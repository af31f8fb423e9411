"""The verifier role: runs the scenario's feedback checks on one draft.

Feedback is what a user has at inference time (`Scenario.check`); the held-out
grade is not the verifier's (`redraft.engine.grader`). Only in an oracle-feedback
run (``oracle``) does the verifier feed the grade back, as an upper bound for
studies, and every `Verification` it writes then says ``oracle``.

Checks run in worker threads (they may wait on a sandboxed subprocess) so the
actor keeps serving other drafts; at most one check per CPU runs at once, so
sandboxed programs do not starve each other into false timeouts. A check that
raises is a bug in the check, not evidence against the candidate: it ends the
task with stop reason ``error`` and cause `CheckError` (a redraft error, such as
`SandboxError` when the sandbox itself cannot run, keeps its own name). A
candidate that crashes its own sandboxed interpreter is evidence: a failed check.

See docs/architecture.md, section "The verifier's stages, steps and questions".
"""

from __future__ import annotations

import asyncio
import functools

import msgspec

from redraft.backends.base import Backend, BackendSpec
from redraft.backends.cache import cached
from redraft.engine._answers import parse_plan, question_json_schema
from redraft.engine._workers import Workers
from redraft.engine.pools import Reply, Request
from redraft.engine.prompts import Prompts, answer_messages, question_messages
from redraft.errors import CheckError, ProtocolError, RedraftError
from redraft.plaintext import plain_text
from redraft.protocols.messages import (
    CheckResult,
    Observation,
    Task,
    Usage,
    Verification,
    VerificationQuestion,
    VerifyRequest,
)
from redraft.sandbox import sweep_stale_workdirs
from redraft.scenarios import get_scenario, score_of

QUESTION_MAX_TOKENS = 256
ANSWER_MAX_TOKENS = 96
# A verifier killed mid-check leaves its sandbox's work directory behind: the next one on the node removes it.
_sweep_sandbox_workdirs_once = functools.cache(sweep_stale_workdirs)


class Verifier:
    """`VerifyRequest` in, `Verification` out."""

    def __init__(
        self,
        scenario: str,
        backend: BackendSpec | None = None,
        *,
        parallel: int | None = None,
        cache: bool = True,
        oracle: bool = False,
        prompts: Prompts | None = None,
        payer: str = "",
    ) -> None:
        self._scenario = get_scenario(scenario)
        self._inline = self._scenario.check_cost == "instant"
        """Instant checks run on the event loop: a worker thread would cost more than the check."""
        _sweep_sandbox_workdirs_once()
        self._oracle = oracle
        self._prompts = prompts
        self._workers = Workers(parallel, name="redraft-verifier")
        # Only chain-of-verification questions use a model; deterministic checks do not.
        self._backend: Backend | None = (
            cached(backend.create(), backend.spec, enabled=cache, payer=payer) if backend is not None else None
        )

    async def serve(self, request: Request) -> Reply:
        if isinstance(request, VerifyRequest):
            return await self.verify(request)
        raise ProtocolError(f"the verifier does not serve `{type(request).__name__}` requests")

    async def verify(self, request: VerifyRequest) -> Verification:
        draft = request.draft
        if self._inline:
            checks, answer, observation = self._check(request)
        else:
            checks, answer, observation = await self._workers.run(self._check, request)
        checks = [c.plain() for c in checks]  # any scenario's words, a user's check's too, enter the loop here
        questions, usage, model = await self._questions(request)
        return Verification(
            task_id=draft.task_id,
            round=draft.round,
            sample=draft.sample,
            score=score_of(checks),
            passed=bool(checks) and all(c.passed for c in checks),
            answer=answer,
            checks=checks,
            stage=request.draft.stage if request.step is not None else request.stage,
            questions=questions,
            usage=usage,
            model=model,
            oracle=self._oracle and request.stage is None and request.step is None,
            observation=observation,
        )

    async def _questions(self, request: VerifyRequest) -> tuple[list[VerificationQuestion], Usage, str]:
        """Chain of verification: plan questions about the candidate, answer each without it."""
        if request.questions <= 0:
            return [], Usage(), ""
        if self._backend is None:
            raise RuntimeError("chain-of-verification questions need a verifier model, and none was configured")
        backend, task, draft = self._backend, request.task, request.draft
        plan = await backend.complete(
            question_messages(task, draft.text, request.questions, self._prompts).request(
                task.task_id,
                max_tokens=QUESTION_MAX_TOKENS,
                temperature=0.0,
                json_schema=question_json_schema(),
            )
        )
        usage, model = plan.usage, plan.model
        try:
            asked = [q.strip() for q in parse_plan(plan.text).questions if q.strip()]
        except (msgspec.ValidationError, msgspec.DecodeError):
            asked = []  # a garbled plan costs its questions, never the task
        asked = asked[: request.questions]
        replies = await asyncio.gather(
            *(
                backend.complete(
                    answer_messages(task, q, self._prompts).request(
                        task.task_id, max_tokens=ANSWER_MAX_TOKENS, temperature=0.0
                    )
                )
                for q in asked
            )
        )
        for reply in replies:
            usage = usage + reply.usage
        answered = [
            VerificationQuestion(question=q, answer=" ".join(r.text.split())[:300])
            for q, r in zip(asked, replies, strict=True)
        ]
        return answered, usage, model

    def _check(self, request: VerifyRequest) -> tuple[list[CheckResult], str | None, Observation | None]:
        try:
            if request.step is not None:
                checks, observation = self._scenario.check_step(request.task, request.step, request.draft.text)
                return checks, None, observation
            if request.stage is not None:
                return self._scenario.check_stage(request.task, request.stage, request.draft.text), None, None
            checks = self._feedback(request.task, request.draft.text)
            answer = self._scenario.answer(request.draft.text)
        except RedraftError:
            raise  # it names its own cause, e.g. SandboxError: the sandbox itself could not run
        except Exception as exc:  # a bug in the check is no evidence against the candidate: end the task
            raise CheckError.of(f"the check of {self._scenario.name}", exc) from exc
        return checks, answer if answer is None else plain_text(answer), None

    def _feedback(self, task: Task, text: str) -> list[CheckResult]:
        """The scenario's checks; in an oracle-feedback run, its held-out grade (the checks if it has none)."""
        if self._oracle:
            graded = self._scenario.grade(task, text)
            if graded is not None:
                return [graded]
        return self._scenario.check(task, text)
