"""The adversarial critic role: attacks one candidate, answers a structured `Critique`.

The model is asked for JSON following `critique_json_schema()` (enforced by the
backend where it can: a llama.cpp grammar, a JSON-schema response format). A
reply that still does not validate becomes a `Critique` with ``error`` set and no
issues: a misbehaving critic costs its opinion, never the task.
"""

from __future__ import annotations

import re

import msgspec

from redraft.actors.prompts import critique_messages
from redraft.backends.base import BackendSpec, ChatRequest
from redraft.backends.cache import cached
from redraft.protocols.messages import (
    Critique,
    CritiqueReport,
    CritiqueRequest,
    critique_json_schema,
    decode_as,
    encode,
)

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")
# Raw control characters are invalid in JSON strings, and small models emit them;
# outside strings they are whitespace, so a space is a safe stand-in everywhere.
_CONTROL = {code: " " for code in range(0x20)}
_report_decoder = msgspec.json.Decoder(CritiqueReport)


def parse_report(text: str) -> CritiqueReport:
    """Validate a model's reply as a `CritiqueReport`; `msgspec.ValidationError`/`DecodeError` if not."""
    return _report_decoder.decode(_FENCE.sub("", text.strip()).translate(_CONTROL))


class Critic:
    def __init__(self, backend: BackendSpec, *, temperature: float, max_tokens: int, cache: bool = True) -> None:
        self._backend = cached(backend.create(), backend.spec, enabled=cache)
        self._schema = critique_json_schema()
        self._temperature = temperature
        self._max_tokens = max_tokens

    async def critique(self, payload: bytes) -> bytes:
        request = decode_as(payload, CritiqueRequest)
        draft = request.draft
        completion = await self._backend.complete(
            ChatRequest(
                messages=critique_messages(request.stance, request.task, draft.text, request.opponent),
                max_tokens=self._max_tokens,
                temperature=self._temperature,
                seed=draft.round * 1000 + draft.sample,
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
