"""Anthropic's Messages API: ``anthropic:MODEL``.

The key comes from ``ANTHROPIC_API_KEY`` (sent as ``Authorization: Bearer``, as
anthropic 2.x does) and the base URL from ``ANTHROPIC_BASE_URL`` if set (the SDK
reads it). The key is read inside
`AnthropicSpec.create`, in the actor, and never stored in the spec, a spec
string, an error message or a log line.

System messages go, joined, into ``system=``; the others are the conversation.
A request's ``seed`` and ``temperature`` are ignored: Anthropic has no seed, and
API version 2026-10-21 (the one anthropic 2.x sends) refuses every sampling
parameter, even ``temperature=1``. A JSON-schema request
becomes a forced call of one tool whose input schema is the requested one
(``report_critique`` for the critic's, ``report_<title>`` for a schema with a title: a
plan, a decision); the completion's text is that tool input as JSON.

Every request goes through `with_retries` with the SDK's own retries off (see
`redraft.backends._retrying`); 529 (overloaded) is retried like any 5xx.

See docs/architecture.md, section "Anthropic: prompt caching and usage".
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from redraft.backends._retrying import RetryPolicy, sdk_error, with_retries
from redraft.backends.base import Backend, ChatRequest, Completion, PerLoop
from redraft.backends.registry import backend
from redraft.errors import BackendError, RetryableBackendError, UserError
from redraft.plaintext import plain_text
from redraft.protocols.messages import Usage

if TYPE_CHECKING:
    from anthropic.types import Message

KEY_ENV = "ANTHROPIC_API_KEY"
DEFAULT_TIMEOUT_S = 60.0
TOOL_NAME = "report_critique"
TOOL_DESCRIPTION = "Report the issues found in the candidate answer. Call this exactly once."
TITLED_DESCRIPTION = "Give your answer in this form. Call this exactly once."
"""The tool of a structured request whose schema has a title (a plan, a decision): ``report_<title>``."""


CACHE_MINIMUM_TOKENS: dict[str, int] = {
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "claude-opus-4": 1024,
    "claude-sonnet-4": 1024,
    "claude-3-7-sonnet": 1024,
}
"""The fewest prompt tokens Anthropic caches at a ``cache_control`` breakpoint, by model-name prefix (the
longest that matches): a shorter prefix is processed uncached. The figures as gateways that pass
``cache_control`` through document Anthropic's (checked 2026-11-28; they agree on these, not on Sonnet 4.6,
left at the default): 4,096 for Claude Opus 4.6, Opus 4.5 and Haiku 4.5; 2,048 for Haiku 3.5 and Haiku 3;
1,024 for Sonnet 4.5, Sonnet 4, Opus 4.1, Opus 4 and Sonnet 3.7. A model not listed:
`DEFAULT_CACHE_MINIMUM_TOKENS`."""
DEFAULT_CACHE_MINIMUM_TOKENS = 1024
"""The smallest documented minimum: an unlisted model whose prefix is shorter caches nothing, at no cost."""
PREFIX_CHARS_PER_TOKEN = 4
"""How a stable prefix's length in tokens is estimated before sending it (the estimate's rule too)."""
BREAKPOINT = {"type": "ephemeral"}
"""The ``cache_control`` of a breakpoint: the 5-minute cache, written at 1.25 times the input price."""


def cache_minimum_tokens(model: str) -> int:
    """The fewest tokens ``model`` caches at a breakpoint (`CACHE_MINIMUM_TOKENS`)."""
    matches = [key for key in CACHE_MINIMUM_TOKENS if model.startswith(key)]
    return CACHE_MINIMUM_TOKENS[max(matches, key=len)] if matches else DEFAULT_CACHE_MINIMUM_TOKENS


def cacheable(model: str, request: ChatRequest) -> bool:
    """Whether ``request``'s stable prefix gets a breakpoint: it is marked, ends in a conversation turn (not in
    the system text), and its estimated length reaches the model's minimum. Below it a breakpoint caches
    nothing, and above it the first call pays the cache write that the next calls' reads repay."""
    prefix = request.stable_prefix()
    if not prefix or prefix[-1].role == "system":
        return False
    return sum(len(m.content) for m in prefix) / PREFIX_CHARS_PER_TOKEN >= cache_minimum_tokens(model)


def _with_breakpoint(request: ChatRequest) -> list[dict[str, Any]]:
    """The last turn's content as text blocks: its stable part, marked as a breakpoint, and the rest (if any)."""
    text = request.messages[-1].content
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text[: request.stable_chars], "cache_control": BREAKPOINT}]
    if text[request.stable_chars :]:
        blocks.append({"type": "text", "text": text[request.stable_chars :]})
    return blocks


@dataclass(frozen=True)
class AnthropicSpec:
    """A validated Anthropic model; holds no secret."""

    remote: ClassVar[bool] = True
    """Its calls in flight adapt to the server's throttling by default (`redraft.backends._ratelimit`)."""

    model: str
    spec: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Per HTTP request, not per call: each retry gets the whole timeout again."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def create(self) -> Backend:
        return AnthropicChat(self)


class AnthropicChat:
    """A Messages API client for one spec; lives in the actor that created it."""

    gates_attempts: ClassVar[bool] = True
    """Each attempt passes the endpoint's `attempt_gate` (its retries are inside `with_retries`)."""

    def __init__(self, spec: AnthropicSpec) -> None:
        try:
            import anthropic
        except ImportError:  # pragma: no cover - anthropic is a dependency of redraft
            raise UserError("the anthropic backend needs the anthropic package (pip install anthropic)") from None
        key = os.environ.get(KEY_ENV)
        if not key:
            raise UserError(f"{spec.spec} needs {KEY_ENV} set where the model calls run (the Ray workers too)")
        self._spec = spec
        self._key = key
        self._clients = PerLoop(
            lambda: anthropic.AsyncAnthropic(
                api_key=key,
                max_retries=0,
                timeout=spec.timeout_s,
                http_client=anthropic.DefaultAioHttpClient(timeout=spec.timeout_s),
            )
        )

    async def complete(self, request: ChatRequest) -> Completion:
        return await with_retries(lambda: self._complete_once(request), policy=self._spec.retry, what=self._spec.spec)

    def _arguments(self, request: ChatRequest) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        arguments: dict[str, Any] = {
            "model": self._spec.model,
            "max_tokens": request.max_tokens,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages if m.role != "system"],
        }
        if cacheable(self._spec.model, request):
            arguments["messages"][-1]["content"] = _with_breakpoint(request)
        if system:
            arguments["system"] = system
        if request.stop:
            arguments["stop_sequences"] = request.stop
        if request.json_schema is not None:
            title = request.json_schema.get("title")
            name, description = (f"report_{title}", TITLED_DESCRIPTION) if title else (TOOL_NAME, TOOL_DESCRIPTION)
            arguments["tools"] = [{"name": name, "description": description, "input_schema": request.json_schema}]
            arguments["tool_choice"] = {"type": "tool", "name": name}
        return arguments

    async def _complete_once(self, request: ChatRequest) -> Completion:
        import anthropic  # already loaded by __init__; imported lazily to keep the CLI's start fast

        arguments = self._arguments(request)
        started = time.perf_counter()
        try:
            response = await self._clients.get().messages.create(**arguments)
        # A 200 with a cut-short JSON body reaches us as the decoder's own error, not the SDK's.
        except (anthropic.AnthropicError, json.JSONDecodeError) as exc:
            raise self._backend_error(exc) from None
        return self._completion(response, time.perf_counter() - started)

    def _completion(self, response: Message, latency_s: float) -> Completion:
        try:
            tool_inputs = [b.input for b in response.content if b.type == "tool_use"]  # the one tool it was offered
            text = (
                json.dumps(tool_inputs[0])
                if tool_inputs
                else "".join(b.text for b in response.content if b.type == "text")
            )
            usage = response.usage
            cache_reads, cache_writes = usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0
            return Completion(
                text=plain_text(text),
                usage=Usage(
                    input_tokens=usage.input_tokens + cache_reads + cache_writes,
                    output_tokens=usage.output_tokens,
                    cached_tokens=cache_reads,
                    calls=1,
                    cache_write_tokens=cache_writes,
                ),
                model=response.model or self._spec.model,
                finish_reason=str(response.stop_reason or ""),
                latency_s=latency_s,
            )
        # The SDK does not validate replies: a body of the wrong shape (or a text
        # body, which it returns as a str) only fails here, on first use.
        except (AttributeError, IndexError, TypeError):
            raise RetryableBackendError(f"{self._spec.spec}: the reply was not a Messages API message") from None

    def _backend_error(self, exc: Exception) -> BackendError:
        import anthropic

        return sdk_error(
            exc,
            anthropic,
            spec=self._spec.spec,
            timeout_s=self._spec.timeout_s,
            key_env=KEY_ENV,
            secret=self._key,
            reply="Messages API message",
        )


@backend("anthropic")
def parse_anthropic(rest: str) -> AnthropicSpec:
    """``anthropic:MODEL``; `UserError` if MODEL is missing or ``ANTHROPIC_API_KEY`` is not set."""
    model = rest.strip()
    if not model:
        raise UserError("the anthropic backend needs a model: 'anthropic:MODEL', e.g. anthropic:claude-sonnet-4-5")
    if not os.environ.get(KEY_ENV):
        raise UserError(f"anthropic:{model} needs an API key: set {KEY_ENV}")
    return AnthropicSpec(model=model, spec=f"anthropic:{model}")
