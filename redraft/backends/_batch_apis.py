"""The providers' batch APIs, one adapter each: OpenAI's Files + Batches, Anthropic's Message Batches.

An adapter turns chat requests into the provider's batch lines, submits them as one
batch (with the run's metadata, where the provider keeps it), lists the batches made
since a time, reports whether a batch has ended, reads its results back as
`Completion`s or `LineFailure`s by custom id, and cancels it. It builds each line's body and reads
each answer with the online client of the same spec (`OpenAIChat`, `AnthropicChat`),
so a request sent in a batch is the request that would be sent online, and its answer
reads the same. What drives the adapters, and why, is `redraft.backends._batch`.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

from redraft.backends._ratelimit import LimitedSpec
from redraft.backends._retrying import sdk_error, server_detail
from redraft.backends.anthropic import AnthropicChat, AnthropicSpec
from redraft.backends.base import ChatRequest, Completion, PerLoop
from redraft.backends.openai import KEY_ENV as OPENAI_KEY_ENV
from redraft.backends.openai import OpenAIChat, OpenAISpec
from redraft.errors import BackendError

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from openai import AsyncOpenAI

FailureKind = Literal["status", "unfinished", "cancelled"]


class LineFailure(msgspec.Struct, frozen=True):
    """A batch line that got no answer: an error status (retried by the online rules, `with_retries`), or
    never run (the batch expired or ran past its wait: the call is made online), or cancelled (the run stops)."""

    kind: FailureKind
    message: str
    status: int = 0


Answer = Completion | LineFailure


class Listed(msgspec.Struct, frozen=True):
    """A batch in the provider's list."""

    id: str
    created_at: float
    """Wall-clock seconds."""
    metadata: dict[str, str] | None
    """What it was sent with; None where the provider keeps no metadata (Anthropic)."""


class BatchAPI(Protocol):
    """One provider's batch API, for one spec."""

    max_lines: int
    max_bytes: int

    def line(self, custom_id: str, request: ChatRequest) -> bytes:
        """The request as one line of the provider's batch (JSON, no newline)."""
        ...

    async def submit(self, lines: list[bytes], metadata: dict[str, str]) -> str:
        """Send one batch, with ``metadata`` where the provider keeps it; its id."""
        ...

    async def listed(self, since: float) -> list[Listed]:
        """The batches made since ``since`` (wall-clock seconds), newest first, every page read."""
        ...

    async def ended(self, batch_id: str) -> bool: ...

    async def results(self, batch_id: str, submitted_at: float) -> dict[str, Answer]:
        """Each ended line's answer by custom id (a line missing here never ran)."""
        ...

    async def cancel(self, batch_id: str) -> None: ...


def batch_api(spec: OpenAISpec | AnthropicSpec) -> BatchAPI:
    return OpenAIBatches(spec) if isinstance(spec, OpenAISpec) else AnthropicBatches(spec)


def batchable(spec: object) -> OpenAISpec | AnthropicSpec | None:
    """The endpoint ``spec`` names (through its rate limits) if it has a batch API: ``openai:`` (OpenAI itself)
    and ``anthropic:``; else None."""
    inner = spec.inner if isinstance(spec, LimitedSpec) else spec
    if (isinstance(inner, OpenAISpec) and not inner.compatible and inner.azure is None) or isinstance(
        inner, AnthropicSpec
    ):
        return inner
    return None


class OpenAIBatches:
    """``POST /v1/files`` (the lines as a JSONL file), ``POST /v1/batches``, its output and error files."""

    max_lines = 50_000
    max_bytes = 190 * 2**20  # the provider's limit is 200 MB per input file

    def __init__(self, spec: OpenAISpec) -> None:
        self._spec = spec
        self._chat = OpenAIChat(spec)  # refuses a missing key
        self._key = self._chat._key
        clients = self._chat._client
        assert isinstance(clients, PerLoop)  # OpenAI itself (`batchable`): the SDK's client, one per loop
        self._clients: PerLoop[AsyncOpenAI] = clients

    def line(self, custom_id: str, request: ChatRequest) -> bytes:
        body = self._chat._arguments(request)
        return json.dumps(
            {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body},
            separators=(",", ":"),
        ).encode()

    async def submit(self, lines: list[bytes], metadata: dict[str, str]) -> str:
        from openai import omit

        async with self._errors():
            client = self._clients.get()
            uploaded = await client.files.create(file=("redraft-batch.jsonl", b"\n".join(lines)), purpose="batch")
            batch = await client.batches.create(
                input_file_id=uploaded.id,
                endpoint="/v1/chat/completions",
                completion_window="24h",
                metadata=metadata or omit,
            )
        return batch.id

    async def listed(self, since: float) -> list[Listed]:
        found: list[Listed] = []
        async with self._errors():
            async for batch in self._clients.get().batches.list(limit=100):  # newest first, paged by the SDK
                if batch.created_at < since:
                    break
                found.append(Listed(batch.id, float(batch.created_at), dict(batch.metadata or {})))
        return found

    async def ended(self, batch_id: str) -> bool:
        async with self._errors():
            batch = await self._clients.get().batches.retrieve(batch_id)
        return batch.status in ("completed", "failed", "expired", "cancelled")

    async def results(self, batch_id: str, submitted_at: float) -> dict[str, Answer]:
        from openai.types.chat import ChatCompletion

        async with self._errors():
            client = self._clients.get()
            batch = await client.batches.retrieve(batch_id)
            files = [f for f in (batch.output_file_id, batch.error_file_id) if f]
            contents = [(await client.files.content(f)).content for f in files]
        answers: dict[str, Answer] = {}
        if batch.status == "failed":  # refused as a whole: its input did not validate
            reasons = "; ".join(e.message or "" for e in (batch.errors.data or [])) if batch.errors else ""
            return _failed_batch(batch_id, reasons)
        latency = max(0.0, time.time() - submitted_at)
        for raw in b"\n".join(contents).splitlines():
            if not raw.strip():
                continue
            line = json.loads(raw)
            custom_id, response, error = line.get("custom_id"), line.get("response"), line.get("error")
            if not isinstance(custom_id, str):
                continue
            if response is not None and response.get("status_code") == 200:
                try:
                    answers[custom_id] = self._chat._completion(
                        ChatCompletion.model_validate(response.get("body")), latency
                    )
                except (BackendError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
                    answers[custom_id] = LineFailure("status", f"{self._spec.spec}: {exc}"[:300], 500)
            elif response is not None:
                status = int(response.get("status_code") or 500)
                detail = f"{self._spec.spec}: {server_detail(response.get('body'), self._key)}"
                answers[custom_id] = LineFailure("status", detail, status)
            else:
                code = (error or {}).get("code", "")
                kind: FailureKind = "cancelled" if code == "batch_cancelled" else "unfinished"
                answers[custom_id] = LineFailure(kind, f"{self._spec.spec}: {code or 'no answer'} in {batch_id}")
        return answers

    async def cancel(self, batch_id: str) -> None:
        async with self._errors():
            await self._clients.get().batches.cancel(batch_id)

    def _errors(self) -> _SDKErrors:
        import openai

        return _SDKErrors(openai, self._spec.spec, self._spec.timeout_s, OPENAI_KEY_ENV, self._key)


class AnthropicBatches:
    """``POST /v1/messages/batches`` and its results (JSONL)."""

    max_lines = 100_000
    max_bytes = 240 * 2**20  # the provider's limit is 256 MB per batch

    def __init__(self, spec: AnthropicSpec) -> None:
        self._spec = spec
        self._chat = AnthropicChat(spec)  # refuses a missing key
        self._key = self._chat._key
        self._clients: PerLoop[AsyncAnthropic] = self._chat._clients

    def line(self, custom_id: str, request: ChatRequest) -> bytes:
        params = self._chat._arguments(request)
        return json.dumps({"custom_id": custom_id, "params": params}, separators=(",", ":")).encode()

    async def submit(self, lines: list[bytes], metadata: dict[str, str]) -> str:
        requests: Any = [json.loads(line) for line in lines]
        async with self._errors():  # a message batch takes no metadata: its custom ids are all that says whose
            batch = await self._clients.get().messages.batches.create(requests=requests)
        return batch.id

    async def listed(self, since: float) -> list[Listed]:
        found: list[Listed] = []
        async with self._errors():
            async for batch in self._clients.get().messages.batches.list(limit=100):  # newest first
                created = batch.created_at.timestamp()
                if created < since:
                    break
                found.append(Listed(batch.id, created, None))
        return found

    async def ended(self, batch_id: str) -> bool:
        async with self._errors():
            batch = await self._clients.get().messages.batches.retrieve(batch_id)
        return batch.processing_status == "ended"

    async def results(self, batch_id: str, submitted_at: float) -> dict[str, Answer]:
        latency = max(0.0, time.time() - submitted_at)
        answers: dict[str, Answer] = {}
        async with self._errors():
            async for line in await self._clients.get().messages.batches.results(batch_id):
                answers[line.custom_id] = self._answer(line.result, latency, batch_id)
        return answers

    def _answer(self, result: Any, latency: float, batch_id: str) -> Answer:
        if result.type == "succeeded":
            try:
                return self._chat._completion(result.message, latency)
            except BackendError as exc:
                return LineFailure("status", str(exc), 500)
        if result.type == "errored":
            error = getattr(result.error, "error", None)
            kind = getattr(error, "type", "api_error")
            message = getattr(error, "message", "") or kind
            return LineFailure("status", f"{self._spec.spec}: {message}"[:300], _ANTHROPIC_STATUS.get(kind, 500))
        if result.type == "canceled":
            return LineFailure("cancelled", f"{self._spec.spec}: cancelled in {batch_id}")
        return LineFailure("unfinished", f"{self._spec.spec}: {result.type} in {batch_id}")

    async def cancel(self, batch_id: str) -> None:
        async with self._errors():
            await self._clients.get().messages.batches.cancel(batch_id)

    def _errors(self) -> _SDKErrors:
        import anthropic

        return _SDKErrors(anthropic, self._spec.spec, self._spec.timeout_s, "ANTHROPIC_API_KEY", self._key)


_ANTHROPIC_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
"""The HTTP status of each error type Anthropic reports in a batch's results."""


class _SDKErrors:
    """Turns an SDK's exception (and its JSON decoder's) into redraft's `BackendError`."""

    def __init__(self, sdk: Any, spec: str, timeout_s: float, key_env: str, key: str) -> None:
        self._sdk, self._spec, self._timeout_s, self._key_env, self._key = sdk, spec, timeout_s, key_env, key

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: Any, exc: BaseException | None, traceback: Any) -> bool:
        if isinstance(exc, self._sdk.APIError | json.JSONDecodeError):
            raise sdk_error(
                exc,
                self._sdk,
                spec=self._spec,
                timeout_s=self._timeout_s,
                key_env=self._key_env,
                secret=self._key,
                reply="batch",
            ) from None
        return False


def _failed_batch(batch_id: str, reasons: str) -> dict[str, Answer]:
    """A batch the provider refused as a whole has no line answers: the caller fails each of its lines."""
    return {"*": LineFailure("status", f"batch {batch_id} was refused: {reasons or 'no reason given'}", 400)}
