"""The verifier role: runs the scenario's deterministic checks on one draft.

Checks run in worker threads (they may wait on a sandboxed subprocess) so the
actor keeps serving other drafts; at most one check per CPU runs at once, so
sandboxed programs do not starve each other into false timeouts. A check that raises does not end the task: it
becomes a failed `check_error` check carrying the exception, so hard evidence of
a broken check is recorded rather than lost.
"""

from __future__ import annotations

import asyncio
import os

from redraft.backends.base import BackendSpec
from redraft.protocols.messages import CheckResult, Verification, VerifyRequest, decode_as, encode
from redraft.scenarios import get_scenario, score_of


class Verifier:
    def __init__(self, scenario: str, backend: BackendSpec | None = None, *, parallel: int | None = None) -> None:
        self._scenario = get_scenario(scenario)
        self._slots = asyncio.Semaphore(parallel or os.cpu_count() or 1)
        # Model-based checks (chain-of-verification) will use this; deterministic checks do not.
        self._backend = backend.create() if backend is not None else None

    async def verify(self, payload: bytes) -> bytes:
        request = decode_as(payload, VerifyRequest)
        draft = request.draft
        async with self._slots:
            checks, answer = await asyncio.to_thread(self._check, request)
        return encode(
            Verification(
                task_id=draft.task_id,
                round=draft.round,
                sample=draft.sample,
                score=score_of(checks),
                passed=bool(checks) and all(c.passed for c in checks),
                answer=answer,
                checks=checks,
            )
        )

    def _check(self, request: VerifyRequest) -> tuple[list[CheckResult], str | None]:
        try:
            checks = self._scenario.check(request.task, request.draft.text)
            answer = self._scenario.answer(request.draft.text)
        except Exception as exc:  # a broken check fails the candidate, not the run
            detail = f"check raised {type(exc).__name__}: {exc}"
            return [CheckResult(name="check_error", passed=False, score=0.0, detail=detail)], None
        return checks, answer
