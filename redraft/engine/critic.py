"""The adversarial critic role: attacks one candidate, answers a structured `Critique`.

The model is asked for JSON following `answers.critique_json_schema()` (enforced by the
backend where it can: a llama.cpp grammar, a JSON-schema response format). A
reply that still does not validate becomes a `Critique` with ``error`` set and no
issues: a misbehaving critic costs its opinion, never the task.
"""

from __future__ import annotations

import msgspec

from redraft.engine._answers import critique_json_schema, parse_report
from redraft.engine._model_role import ModelRole
from redraft.engine.pools import Reply, Request
from redraft.engine.prompts import critique_messages
from redraft.errors import ProtocolError
from redraft.protocols.messages import Critique, CritiqueRequest


class Critic(ModelRole):
    """`CritiqueRequest` in, `Critique` out."""

    _SCHEMA = critique_json_schema()
    """What a critic model must answer in (enforced where the backend can)."""

    async def serve(self, request: Request) -> Reply:
        if isinstance(request, CritiqueRequest):
            return await self.critique(request)
        raise ProtocolError(f"the critic does not serve `{type(request).__name__}` requests")

    async def critique(self, request: CritiqueRequest) -> Critique:
        draft = request.draft
        prompt = critique_messages(request.stance, request.task, draft.text, request.opponent, self._prompts)
        completion = await self._backend.complete(
            prompt.request(
                request.task.task_id,
                max_tokens=self._max_tokens,
                temperature=self._temperature,
                seed=request.seed,
                json_schema=self._SCHEMA,
            )
        )
        error: str | None = None
        issues = []
        try:
            issues = parse_report(completion.text).issues
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            error = f"critic reply is not a valid critique ({exc}); reply began {completion.text[:80]!r}"
        return Critique(
            task_id=draft.task_id,
            round=draft.round,
            sample=draft.sample,
            issues=list(issues),
            usage=completion.usage,
            model=completion.model,
            error=error,
            stance=request.stance,
            messages=prompt.messages,
        )
