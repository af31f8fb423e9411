"""The drafter role: writes candidates, fresh or revised from the arbiter's feedback."""

from __future__ import annotations

from redraft.actors.prompts import draft_messages
from redraft.actors.runtime import node_id
from redraft.backends.base import BackendSpec, ChatRequest
from redraft.backends.cache import cached
from redraft.protocols.messages import Draft, DraftRequest, decode_as, encode
from redraft.scenarios import get_scenario


class Drafter:
    """Bytes in (`DraftRequest`), bytes out (`Draft`); one backend client per actor."""

    def __init__(
        self, backend: BackendSpec, scenario: str, *, temperature: float, max_tokens: int, cache: bool = True
    ) -> None:
        self._backend = cached(backend.create(), backend.spec, enabled=cache)
        self._system = get_scenario(scenario).system_prompt()
        self._temperature = temperature
        self._max_tokens = max_tokens

    async def draft(self, payload: bytes) -> bytes:
        request = decode_as(payload, DraftRequest)
        completion = await self._backend.complete(
            ChatRequest(
                messages=draft_messages(self._system, request.task, request.revision),
                max_tokens=self._max_tokens,
                temperature=self._temperature,
                seed=request.seed,
            )
        )
        return encode(
            Draft(
                task_id=request.task.task_id,
                round=request.round,
                sample=request.sample,
                text=completion.text,
                usage=completion.usage,
                model=completion.model,
                finish_reason=completion.finish_reason,
                latency_s=completion.latency_s,
                node_id=node_id(),
            )
        )
