"""The adversarial critic role: attacks one candidate, answers a structured `Critique`.

The model is asked for JSON following `answers.critique_json_schema()` (enforced by the
backend where it can: a llama.cpp grammar, a JSON-schema response format). A
reply that still does not validate becomes a `Critique` with ``error`` set and no
issues: a misbehaving critic costs its opinion, never the task.
"""

from __future__ import annotations

import msgspec

from redraft.actors.batches import Batching
from redraft.backends.base import BackendSpec, ChatRequest
from redraft.backends.cache import cached
from redraft.engine.answers import critique_json_schema, parse_report
from redraft.engine.prompts import Prompts, critique_messages
from redraft.protocols.messages import Critique, CritiqueRequest, decode_as, encode
from redraft.runtime import die_with_raylet


class Critic(Batching):
    def __init__(
        self,
        backend: BackendSpec,
        *,
        temperature: float,
        max_tokens: int,
        cache: bool = True,
        prompts: Prompts | None = None,
    ) -> None:
        die_with_raylet()  # a driver-owned Ray whose driver died: stop, do not run paid calls on
        self._backend = cached(backend.create(), backend.spec, enabled=cache)
        self._schema = critique_json_schema()
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._prompts = prompts

    async def critique(self, payload: bytes) -> bytes:
        request = decode_as(payload, CritiqueRequest)
        draft = request.draft
        completion = await self._backend.complete(
            ChatRequest(
                messages=critique_messages(request.stance, request.task, draft.text, request.opponent, self._prompts),
                max_tokens=self._max_tokens,
                temperature=self._temperature,
                seed=request.seed,
                json_schema=self._schema,
            )
        )
        error: str | None = None
        issues = []
        try:
            issues = parse_report(completion.text).issues
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            error = f"critic reply is not a valid critique ({exc}); reply began {completion.text[:80]!r}"
        return encode(
            Critique(
                task_id=draft.task_id,
                round=draft.round,
                sample=draft.sample,
                issues=list(issues),
                usage=completion.usage,
                model=completion.model,
                error=error,
                stance=request.stance,
            )
        )
