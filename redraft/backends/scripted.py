"""A deterministic test double: replies come from a list or a callable.

``ScriptedBackend(["a", "b"])`` answers "a", then "b", then raises
`ScriptExhaustedError`. ``ScriptedBackend(fn)`` answers ``fn(request)``; a callable
is the right choice when several actors share one script, since each actor holds
its own copy of a list. From the CLI, ``scripted:MODULE:FUNC`` names such a
callable. Usage is counted as whitespace-separated words, so tests can predict it.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from redraft.backends.base import Backend, ChatRequest, Completion
from redraft.backends.registry import backend
from redraft.errors import ScriptExhaustedError, UserError
from redraft.protocols.messages import Usage

Reply = Callable[[ChatRequest], str]


class ScriptedBackend:
    """Answers from a script; see the module docstring."""

    def __init__(self, script: Sequence[str] | Reply, *, model: str = "scripted", delay_s: float = 0.0) -> None:
        self._script = script
        self._model = model
        self._delay_s = delay_s
        self.calls = 0
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        self.calls += 1
        if callable(self._script):
            text = self._script(request)
        else:
            if self.calls > len(self._script):
                raise ScriptExhaustedError(self.calls - 1)
            text = self._script[self.calls - 1]
        if self._delay_s:
            await asyncio.sleep(self._delay_s)  # a simulated model latency, off the event loop
        prompt_words = sum(len(m.content.split()) for m in request.messages)
        return Completion(
            text=text,
            usage=Usage(input_tokens=prompt_words, output_tokens=len(text.split()), calls=1),
            model=self._model,
            finish_reason="stop",
            latency_s=self._delay_s,
        )


@dataclass(frozen=True)
class ScriptedSpec:
    """Picklable spec of a scripted backend (the script travels to each actor)."""

    script: Sequence[str] | Reply
    spec: str = "scripted"
    model: str = field(default="scripted")
    delay_s: float = 0.0

    def create(self) -> Backend:
        return ScriptedBackend(self.script, model=self.model, delay_s=self.delay_s)


@backend("scripted")
def parse_scripted(rest: str) -> ScriptedSpec:
    """``scripted:MODULE:FUNC`` — FUNC(request) -> str gives every reply."""
    module_name, _, func_name = rest.partition(":")
    if not module_name or not func_name:
        raise UserError(f"scripted backend needs 'scripted:MODULE:FUNC', got 'scripted:{rest}'")
    try:
        func = getattr(importlib.import_module(module_name), func_name)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot load scripted reply function {rest!r}: {exc}") from None
    if not callable(func):
        raise UserError(f"scripted reply {rest!r} is not callable")
    return ScriptedSpec(script=func, spec=f"scripted:{rest}", model=f"scripted:{func_name}")
