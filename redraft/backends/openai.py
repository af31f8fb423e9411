"""OpenAI Chat Completions, from OpenAI itself or from any server that speaks its API.

- ``openai:MODEL`` calls OpenAI; the key comes from ``OPENAI_API_KEY`` and the
  base URL from the driver's ``OPENAI_BASE_URL`` if set (read where the spec is
  parsed, so every worker calls the endpoint the driver names).
- ``openai-compatible:MODEL@URL`` calls a server such as vLLM, llama.cpp's
  ``llama-server`` or Ollama at URL (e.g. ``http://127.0.0.1:8000/v1``); the key
  is optional (``OPENAI_API_KEY`` if set, else a placeholder).
- ``azure:DEPLOYMENT`` calls an Azure OpenAI deployment through the SDK's
  ``AsyncAzureOpenAI`` (`redraft.backends.azure` parses the spec; the request, its
  retries, usage and structured output are this module's).

The key is read from the environment inside `OpenAISpec.create`, that is in the
actor; it is never stored in the spec, in a spec string, in an error message or
in a log line.

Every request goes through `with_retries`; the SDK's own retries are off (see
`redraft.backends._retrying`). A 200 whose body is not a chat completion (bad
JSON, no choices) is treated as a transient proxy fault and retried: a server
that always sends one fails after ``retry.max_attempts`` requests.

See docs/architecture.md, section "OpenAI: prompt cache, structured output, the body".
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from redraft.backends._chat_wire import ChatWire, StatusError, WireReply
from redraft.backends._retrying import RetryPolicy, error_for_status, sdk_error, server_detail, with_retries
from redraft.backends.base import Backend, ChatRequest, Completion, PerLoop
from redraft.backends.registry import backend
from redraft.errors import BackendError, RetryableBackendError, UserError
from redraft.plaintext import plain_text
from redraft.protocols.messages import Usage

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion

log = logging.getLogger(__name__)

KEY_ENV = "OPENAI_API_KEY"
CACHE_MINIMUM_TOKENS = 1024
"""The shortest prompt prefix OpenAI's prompt cache serves (it caches by itself, no breakpoint)."""
AZURE_KEY_ENV = "AZURE_OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
PLACEHOLDER_KEY = "not-needed"
"""Sent to OpenAI-compatible servers when no key is set: a bearer header is what servers that check keys expect,
and most local servers ignore it."""
DEFAULT_TIMEOUT_S = 60.0
SCHEMA_NAME = "critique"
"""The ``json_schema.name`` sent with a structured request whose schema has no title (a critique's)."""


def schema_name(request: ChatRequest) -> str:
    """The name of a structured request's answer: its schema's title (``plan``, ``decision``), else a critique."""
    title = (request.json_schema or {}).get("title")
    return title if isinstance(title, str) and title else SCHEMA_NAME


@dataclass(frozen=True)
class AzureTarget:
    """Where an Azure OpenAI deployment lives: the resource's endpoint and the API version asked for."""

    endpoint: str
    """``https://RESOURCE.openai.azure.com``: the SDK adds ``/openai/deployments/DEPLOYMENT``."""
    api_version: str
    """Sent as the ``api-version`` query of every request."""


@dataclass(frozen=True)
class OpenAISpec:
    """A validated OpenAI, OpenAI-compatible or Azure OpenAI endpoint and model; holds no secret."""

    remote: ClassVar[bool] = True
    """Its calls in flight adapt to the server's throttling by default (`redraft.backends._ratelimit`)."""

    model: str
    spec: str
    base_url: str | None = None
    """None: the SDK's default. ``OPENAI_BASE_URL`` where the spec was parsed, for ``openai``; always set for
    ``openai-compatible``."""
    compatible: bool = False
    """An OpenAI-compatible server: the key is optional, ``max_tokens`` is sent, schema fallback allowed."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Per HTTP request, not per call: each retry gets the whole timeout again."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    azure: AzureTarget | None = None
    """Set for ``azure:``: ``model`` is then the deployment's name, the key ``AZURE_OPENAI_API_KEY``'s."""

    @property
    def key_env(self) -> str:
        """The variable the key is read from, where the calls run."""
        return AZURE_KEY_ENV if self.azure is not None else KEY_ENV

    def create(self) -> Backend:
        return OpenAIChat(self)


class _ResponseFormatRejected(Exception):
    """The server refused ``response_format``; not a `BackendError`, so `with_retries` lets it through."""


class OpenAIChat:
    """A Chat Completions client for one spec; lives in the actor that created it."""

    gates_attempts: ClassVar[bool] = True
    """Each attempt passes the endpoint's `attempt_gate` (its retries are inside `with_retries`)."""

    def __init__(self, spec: OpenAISpec) -> None:
        key = os.environ.get(spec.key_env) or (PLACEHOLDER_KEY if spec.compatible else None)
        if key is None:
            raise UserError(f"{spec.spec} needs {spec.key_env} set where the model calls run (the Ray workers too)")
        self._spec = spec
        self._key = key
        self._client: ChatWire | PerLoop[AsyncOpenAI] = (
            ChatWire(spec.base_url, key, timeout_s=spec.timeout_s, spec=spec.spec)
            if spec.compatible and spec.base_url
            else PerLoop(lambda: _sdk_client(spec, key))
        )
        """A compatible server's own client, or the openai SDK's (one per event loop) for OpenAI proper."""
        self._format = 0
        """How structured output is asked for: an index into `_FORMATS`. A compatible server that
        refuses one form moves the client to the next, for good."""

    async def complete(self, request: ChatRequest) -> Completion:
        while request.json_schema is not None and self._spec.compatible and _FORMATS[self._format] != "prompt":
            try:
                return await self._complete_with_retries(request)
            except _ResponseFormatRejected as exc:
                refused, self._format = _FORMATS[self._format], self._format + 1
                log.warning(
                    "%s refused response_format %s (%s); trying %s instead",
                    self._spec.spec,
                    refused,
                    exc,
                    _FORMATS[self._format],
                )
        return await self._complete_with_retries(request)

    async def _complete_with_retries(self, request: ChatRequest) -> Completion:
        return await with_retries(lambda: self._complete_once(request), policy=self._spec.retry, what=self._spec.spec)

    def _arguments(self, request: ChatRequest) -> dict[str, Any]:
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        arguments: dict[str, Any] = {"model": self._spec.model, "temperature": request.temperature}
        # OpenAI's newer models refuse max_tokens; many compatible servers know only max_tokens.
        arguments["max_tokens" if self._spec.compatible else "max_completion_tokens"] = request.max_tokens
        if request.seed is not None:
            arguments["seed"] = request.seed
        if request.stop:
            arguments["stop"] = request.stop
        if request.cache_key and not self._spec.compatible and self._spec.azure is None:
            arguments["prompt_cache_key"] = request.cache_key  # OpenAI's own: others may refuse what they lack
        if request.json_schema is not None:
            form = _FORMATS[self._format]
            if form == "prompt":
                messages = _with_schema_instruction(messages, request.json_schema)
            elif form == "json_object":  # llama.cpp's and vLLM's form: a grammar from the schema
                arguments["response_format"] = {"type": "json_object", "schema": request.json_schema}
            else:
                arguments["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": schema_name(request), "schema": request.json_schema, "strict": False},
                }
        arguments["messages"] = messages
        return arguments

    async def _complete_once(self, request: ChatRequest) -> Completion:
        arguments = self._arguments(request)
        started = time.perf_counter()
        client = self._client
        response = await (
            self._post_wire(client, arguments) if isinstance(client, ChatWire) else self._post_sdk(client, arguments)
        )
        return self._completion(response, time.perf_counter() - started)

    async def _post_wire(self, wire: ChatWire, arguments: dict[str, Any]) -> WireReply:
        try:
            return await wire.post(arguments)
        except StatusError as exc:
            if "response_format" in arguments and _refuses_response_format(exc):
                raise _ResponseFormatRejected(f"HTTP {exc.status}: {server_detail(exc.body, self._key)}") from None
            raise error_for_status(
                exc.status, exc.body, exc.headers, spec=self._spec.spec, key_env=self._spec.key_env, secret=self._key
            ) from None

    async def _post_sdk(self, clients: PerLoop[AsyncOpenAI], arguments: dict[str, Any]) -> ChatCompletion:
        import openai  # loaded with the client; imported lazily to keep the CLI's start fast
        from openai.types.chat import ChatCompletion

        try:
            # `post`, not `chat.completions.create`: the body as built (see the module docstring).
            response: ChatCompletion = await clients.get().post(
                "/chat/completions", body=arguments, cast_to=ChatCompletion
            )
        # A 200 with a cut-short JSON body reaches us as the decoder's own error, not the SDK's.
        except (openai.OpenAIError, json.JSONDecodeError) as exc:
            raise self._backend_error(exc) from None
        return response

    def _completion(self, response: ChatCompletion | WireReply, latency_s: float) -> Completion:
        try:
            choice = response.choices[0]
            usage = response.usage
            details = usage.prompt_tokens_details if usage is not None else None
            return Completion(
                text=plain_text(choice.message.content or ""),
                usage=Usage(
                    input_tokens=usage.prompt_tokens if usage is not None else 0,
                    output_tokens=usage.completion_tokens if usage is not None else 0,
                    cached_tokens=(details.cached_tokens or 0) if details is not None else 0,
                    calls=1,
                ),
                # An Azure deployment is priced by its own name (the estimate's too): the model it serves is Azure's.
                model=self._spec.model if self._spec.azure else response.model or self._spec.model,
                finish_reason=str(choice.finish_reason or ""),
                latency_s=latency_s,
            )
        # The SDK does not validate replies: a body of the wrong shape (or a text
        # body, which it returns as a str) only fails here, on first use.
        except (AttributeError, IndexError, TypeError):
            raise RetryableBackendError(f"{self._spec.spec}: the reply was not a chat completion") from None

    def _backend_error(self, exc: Exception) -> BackendError:
        import openai

        return sdk_error(
            exc,
            openai,
            spec=self._spec.spec,
            timeout_s=self._spec.timeout_s,
            key_env=self._spec.key_env,
            secret=self._key,
            reply="chat completion",
        )


def _sdk_client(spec: OpenAISpec, key: str) -> AsyncOpenAI:
    """The openai SDK's client for OpenAI proper or an Azure deployment: its retries off (ours retry), over
    aiohttp. Azure's client posts the same body to ``/openai/deployments/DEPLOYMENT/chat/completions`` with the
    ``api-version`` query and the key in an ``api-key`` header."""
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a dependency of redraft
        raise UserError("the openai backend needs the openai package (pip install openai)") from None
    transport = openai.DefaultAioHttpClient(timeout=spec.timeout_s)
    if spec.azure is not None:
        return openai.AsyncAzureOpenAI(
            api_key=key,
            azure_endpoint=spec.azure.endpoint,
            azure_deployment=spec.model,
            api_version=spec.azure.api_version,
            max_retries=0,
            timeout=spec.timeout_s,
            http_client=transport,
        )
    return openai.AsyncOpenAI(
        api_key=key, base_url=spec.base_url, max_retries=0, timeout=spec.timeout_s, http_client=transport
    )


_FORMATS = ("json_schema", "json_object", "prompt")
"""Structured-output forms, tried in this order on compatible servers."""


def _refuses_response_format(error: StatusError) -> bool:
    """Whether an error answer refuses ``response_format``: servers that do not know it say so with 400, 422,
    or (llama.cpp's) 500, naming it."""
    text = json.dumps(error.body, default=str)
    return error.status in (400, 422, 500) and ("response_format" in text or "json_schema" in text)


def _with_schema_instruction(messages: list[dict[str, str]], schema: dict[str, Any]) -> list[dict[str, str]]:
    """The messages with an instruction to answer in JSON of ``schema``, in the (first) system message.

    Merged rather than added, because some chat templates accept a single system message only.
    """
    instruction = "Answer with one JSON object and nothing else. It must follow this JSON Schema:\n" + json.dumps(
        schema
    )
    if messages and messages[0]["role"] == "system":
        first = messages[0]
        return [{"role": "system", "content": f"{first['content']}\n\n{instruction}"}, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


_SCHEME = re.compile(r"@(?=https?://)")


@backend("openai")
def parse_openai(rest: str) -> OpenAISpec:
    """``openai:MODEL``; `UserError` if MODEL is missing or ``OPENAI_API_KEY`` is not set."""
    model = rest.strip()
    if not model:
        raise UserError("the openai backend needs a model: 'openai:MODEL', e.g. openai:gpt-4o-mini")
    if not os.environ.get(KEY_ENV):
        raise UserError(f"openai:{model} needs an API key: set {KEY_ENV}")
    # The driver's base URL goes with the spec to every worker (the key does not: each reads its own).
    return OpenAISpec(model=model, spec=f"openai:{model}", base_url=os.environ.get(BASE_URL_ENV) or None)


@backend("openai-compatible")
def parse_openai_compatible(rest: str) -> OpenAISpec:
    """``openai-compatible:MODEL@URL`` with an http(s) URL; `UserError` if either part is missing or bad."""
    usage = "'openai-compatible:MODEL@URL', e.g. openai-compatible:qwen2.5-7b@http://127.0.0.1:8000/v1"
    if "@" not in rest:
        raise UserError(f"the openai-compatible backend needs a server URL: {usage}")
    # The URL starts at the first "@http(s)://", so a model name may itself hold an "@".
    parts = _SCHEME.split(rest.strip(), maxsplit=1)
    if len(parts) != 2:
        url = rest.rpartition("@")[2]
        raise UserError(f"openai-compatible server URL must start with http:// or https://, got {url!r}: {usage}")
    model, url = parts
    if not model:
        raise UserError(f"the openai-compatible backend needs a model name: {usage}")
    parsed = urlsplit(url)
    if parsed.username or parsed.password:
        # The spec string is logged and traced (and this URL is not echoed): credentials belong in the variable.
        raise UserError(f"put the key in {KEY_ENV}, not in the openai-compatible server URL")
    if not parsed.hostname:
        raise UserError(f"openai-compatible server URL has no host: {url!r}")
    return OpenAISpec(model=model, spec=f"openai-compatible:{model}@{url}", base_url=url, compatible=True)
