"""The OpenAI Chat Completions wire over plain aiohttp: how ``openai-compatible:`` talks to its server.

A compatible server (vLLM, llama.cpp's ``llama-server``, Ollama) usually answers
from the same machine or rack in milliseconds, so the client's own CPU per call
bounds how many calls an actor makes per second. The openai SDK spends most of
it on machinery a plain POST does not need: building its request options, an
httpx layer over the aiohttp transport, and response models made field by field
(``benchmarks/bench_http_clients.py`` measures the CPU per call of both clients).
``openai:`` keeps the SDK, whose calls cross the internet and whose extras
(organisations, projects, its own base-URL variables) belong to OpenAI proper.

`ChatWire.post` sends one JSON body and returns the reply decoded into
`WireReply`, a typed view of the fields redraft reads (unknown fields ignored,
missing optional ones defaulted), or raises:

- `StatusError` for an answer other than 2xx, with its status, its body (parsed
  JSON where it is JSON, else the text) and its headers: the caller decides what
  it means (`redraft.backends._retrying.error_for_status`, or a refused
  ``response_format``);
- `RetryableBackendError` for no reply within the timeout, a connection that
  failed or dropped, and a 2xx whose body is not a chat completion.

Error texts never hold the key: whatever came from the server is redacted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from redraft.backends._retrying import transport_error
from redraft.backends.base import PerLoop
from redraft.errors import RetryableBackendError
from redraft.protocols.bounds import MAX_FRAME_BYTES, TooComplex, bounded

if TYPE_CHECKING:
    import aiohttp

CONNECTIONS = 1000
"""Connections open at once per client, as the openai SDK allows: a drafter serving 64 tasks of K=3 has 192
requests out, and aiohttp's default of 100 would queue half of them."""


class WireMessage(msgspec.Struct):
    content: str | None = None


class WireChoice(msgspec.Struct):
    message: WireMessage
    finish_reason: str | None = None


class WireTokenDetails(msgspec.Struct):
    cached_tokens: int | None = None


class WireUsage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_details: WireTokenDetails | None = None


class WireReply(msgspec.Struct):
    """The fields of a chat completion that redraft reads (named as in the openai SDK's ``ChatCompletion``)."""

    choices: list[WireChoice]
    model: str | None = None
    usage: WireUsage | None = None


class StatusError(Exception):
    """The server answered with an HTTP error status; not a `BackendError`: the caller maps it."""

    def __init__(self, status: int, body: object, headers: Mapping[str, str]) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body
        self.headers = headers


_reply_decoder = msgspec.json.Decoder(WireReply)
_encoder = msgspec.json.Encoder()


def decode_reply(payload: bytes) -> WireReply:
    """A 2xx body as a `WireReply`; `msgspec.ValidationError` or `ValueError` if it is not one.

    msgspec refuses a JSON string holding a lone surrogate escape (``"\\ud800"``), which Python's
    own decoder takes: such a body is decoded again that way, so a misbehaving model costs a
    character (`redraft.plaintext.plain_text`), not the call.
    """
    try:
        return bounded(_reply_decoder.decode, payload, what="the server's reply", max_bytes=MAX_FRAME_BYTES)
    except TooComplex:
        raise
    except msgspec.DecodeError:
        return msgspec.convert(json.loads(payload), WireReply)


class ChatWire:
    """Posts Chat Completions bodies to ``base_url``; one aiohttp session per event loop (`PerLoop`)."""

    def __init__(self, base_url: str, key: str, *, timeout_s: float, spec: str) -> None:
        import aiohttp  # with the first client, not the module: registering the backends stays light (driver, actors)

        self._client_error: type[Exception] = aiohttp.ClientError
        self._url = f"{base_url.rstrip('/')}/chat/completions"
        self._key = key
        self._timeout_s = timeout_s
        self._spec = spec
        self._headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "redraft",
        }
        self._sessions = PerLoop(self._session)

    def _session(self) -> aiohttp.ClientSession:
        import aiohttp

        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=CONNECTIONS),
            timeout=aiohttp.ClientTimeout(total=self._timeout_s),
            headers=self._headers,
        )

    async def post(self, body: dict[str, Any]) -> WireReply:
        try:
            async with self._sessions.get().post(self._url, data=_encoder.encode(body)) as response:
                payload = await response.read()
                status, headers = response.status, response.headers
        except (TimeoutError, self._client_error, OSError) as exc:
            raise transport_error(exc, spec=self._spec, timeout_s=self._timeout_s, secret=self._key) from None
        if not 200 <= status < 300:
            raise StatusError(status, _error_body(payload), headers)
        try:
            return decode_reply(payload)
        except (msgspec.ValidationError, ValueError):  # JSONDecodeError is a ValueError
            raise RetryableBackendError(f"{self._spec}: the reply was not a chat completion") from None


def _error_body(payload: bytes) -> object:
    """An error answer's body: its JSON if it parses, else its text."""
    try:
        return json.loads(payload)
    except ValueError:
        return payload.decode("utf-8", errors="replace")
