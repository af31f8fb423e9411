"""A real HTTP server on 127.0.0.1 that speaks the OpenAI and Anthropic wire formats.

The openai and anthropic SDKs send through ``httpx2``, which HTTP mocking
libraries do not intercept, so backend tests talk to this server over a real
socket instead. It answers ``POST /v1/chat/completions`` (OpenAI Chat
Completions), ``POST /openai/deployments/DEPLOYMENT/chat/completions?api-version=V``
(Azure OpenAI's shape of it: a 404 without the ``api-version`` query, as Azure
answers, a 401 without an ``api-key`` header, and the reply naming the model the
deployment serves, `azure_model`) and ``POST /v1/messages`` (Anthropic Messages),
records every request it saw, and plays a script of faults, one per request, before it
answers normally again::

    with FakeLLMServer() as server:
        server.script(Fault.rate_limited(retry_after="0.3"), Fault.server_error())
        ...  # the first two requests fail, the third gets `server.reply_text`

Every response closes its connection (HTTP/1.0), so a client never reuses a
socket the server already dropped: each fault is seen by exactly one request.

For load and chaos tests the server can answer by a function of the request body
(``reply_for``), fail every request alike (``fail_status``: a server down), and
hold every request unanswered while it is frozen (``freeze``/``thaw``). Its listen
backlog is large, so dozens of concurrent clients are not reset.

It also serves both providers' batch APIs (OpenAI's Files and Batches, Anthropic's Message Batches), in
tests/support/fake_batch_apis.py: a batch's lines are answered as the online endpoints answer them, after
``batch_delay_s`` or never while ``batch_hold`` is set, and ``batch_fail`` fails the lines it picks. Their requests
are recorded in ``batch_requests``, not ``requests`` (which holds the chat requests only), and their batches in
``batches``. Scripted faults, ``fail_status`` and ``freeze`` apply to them too; ``latency_s`` and
``max_concurrent`` (a model's latency and concurrency) do not.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from tests.support import fake_batch_apis
from tests.support.fake_batch_apis import BatchAPIs, SeenBatch
from tests.support.fake_prompt_cache import FakePromptCache

__all__ = ["FakeLLMServer", "Fault", "SeenBatch", "SeenRequest"]

_AZURE_CHAT = re.compile(r"^/openai/deployments/[^/?]+/chat/completions(\?|$)")

FaultKind = Literal["status", "slow", "malformed", "drop"]


@dataclass(frozen=True)
class Fault:
    """What the server does to one request instead of answering it normally."""

    kind: FaultKind
    status: int = 0
    message: str = ""
    """The error message in the body of a ``status`` fault."""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    """For ``slow``: how long to wait before answering (normally, if the client still listens)."""

    @staticmethod
    def rate_limited(retry_after: str = "1") -> Fault:
        return Fault("status", 429, "rate limit reached", {"Retry-After": retry_after})

    @staticmethod
    def server_error(status: int = 500) -> Fault:
        return Fault("status", status, "the server had an error")

    @staticmethod
    def overloaded() -> Fault:
        return Fault("status", 529, "Overloaded")

    @staticmethod
    def bad_request(message: str = "messages: field required") -> Fault:
        return Fault("status", 400, message)

    @staticmethod
    def unauthorized() -> Fault:
        return Fault("status", 401, "invalid x-api-key")

    @staticmethod
    def slow(delay_s: float) -> Fault:
        return Fault("slow", delay_s=delay_s)

    @staticmethod
    def malformed() -> Fault:
        """A 200 whose JSON body is cut short, as a misbehaving proxy might send."""
        return Fault("malformed")

    @staticmethod
    def dropped() -> Fault:
        """The connection is closed after the request is read, with no response at all."""
        return Fault("drop")


@dataclass(frozen=True)
class SeenRequest:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: dict[str, Any]
    arrived: float
    """`time.monotonic()` when the whole request had been read."""


class _Server(ThreadingHTTPServer):
    request_queue_size = 512  # the stdlib's 5 resets connections under a few dozen concurrent clients


class FakeLLMServer:
    """A threaded HTTP server in the background; a context manager that starts and stops it."""

    def __init__(self) -> None:
        self.reply_text = "Hello from the fake server."
        """What the model answers; for a forced Anthropic tool call it must be a JSON object."""
        self.model = "fake-model-1"
        self.azure_model = "gpt-4o-mini-2024-07-18"
        """What an Azure deployment's replies name: the model it serves, never the deployment."""
        self.input_tokens = 11
        self.output_tokens = 7
        self.cached_tokens = 3
        self.cache_creation_tokens = 2
        """Anthropic only: prompt tokens written to the cache."""
        self.prompt_cache: FakePromptCache | None = None
        """When set, each answer's usage is a function of its request, cached as the providers cache
        (tests/support/fake_prompt_cache.py), instead of the counts above."""
        self.latency_s = 0.0
        """Added to every answer, to simulate a model's latency (benchmarks)."""
        self.reject_response_format = False
        """Answer 400 to any Chat Completions request that carries ``response_format``."""
        self.reply_for: Callable[[dict[str, Any]], str] | None = None
        """When set, the reply text of each request, from its JSON body (instead of `reply_text`)."""
        self.fail_status: int | None = None
        """When set, every request is answered with this HTTP status (a server that is down)."""
        self.max_concurrent: int | None = None
        """When set, a request arriving while this many are being answered gets a 429 (``Retry-After``:
        `throttle_retry_after`), as a provider's concurrency limit answers; `throttled` counts them."""
        self.throttle_retry_after = "0.1"
        self.throttled = 0
        self._answering = 0
        self._thawed = threading.Event()
        self._thawed.set()
        self.batch_delay_s = 0.0
        """A batch is in progress for this long after its creation, then done (its lines answered)."""
        self.batch_hold = False
        """While set, no batch is ever done (one that never ends within a run's deadline); a cancel still ends it."""
        self.batch_fail: Callable[[str, dict[str, Any]], int | None] | None = None
        """When set, called with (custom_id, request body) of each line as its batch is done: a status (500, 400,
        529...) fails that line (OpenAI: a line of the error file with that ``status_code``; Anthropic: ``errored``,
        with an ``api_error`` for a 5xx, ``overloaded_error`` for 529, ``invalid_request_error`` for a 4xx)."""
        self.requests: list[SeenRequest] = []
        """The chat requests (``/v1/chat/completions``, ``/v1/messages``), not the batch APIs' ones."""
        self.batch_requests: list[SeenRequest] = []
        """The batch APIs' requests (a multipart upload's body is ``{"multipart_bytes": n}``)."""
        self.batches: list[SeenBatch] = []
        """Every batch created, in order."""
        self.batch_lines_answered = 0
        """Batch lines that got a model's answer (not failed, not cancelled): to compare with online requests."""
        self._batch_apis = BatchAPIs(self)
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.fake = self  # type: ignore[attr-defined]
        # A short poll interval: shutdown() waits for the next poll, 0.5 s by default.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-llm-server", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def azure_endpoint(self) -> str:
        return self.url  # the SDK appends /openai/deployments/DEPLOYMENT itself

    @property
    def anthropic_base_url(self) -> str:
        return self.url  # the SDK appends /v1/messages itself

    def script(self, *faults: Fault) -> None:
        """Queue faults: the next requests get them in order, then normal answers."""
        with self._lock:
            self._faults.extend(faults)

    def freeze(self) -> None:
        """Hold every request (those arriving and those not yet answered) until `thaw`."""
        self._thawed.clear()

    def thaw(self) -> None:
        self._thawed.set()

    def _hold_while_frozen(self) -> None:
        while not self._thawed.wait(0.05) and not self._stopping.is_set():
            pass

    def __enter__(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stopping.set()  # wakes any handler still sleeping in a slow fault, or held while frozen
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _record(self, seen: SeenRequest, *, batch: bool = False) -> Fault | None:
        with self._lock:
            (self.batch_requests if batch else self.requests).append(seen)
            return self._faults.pop(0) if self._faults else None

    def _over_the_limit(self, *, scripted: bool) -> bool:
        """Count this request in; True if it is over `max_concurrent` (counted as throttled), unless it has a
        ``scripted`` fault of its own."""
        with self._lock:
            self._answering += 1
            over = not scripted and self.max_concurrent is not None and self._answering > self.max_concurrent
            self.throttled += over
            return over

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    # ------------------------------------------------------------ wire formats

    def openai_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": self.reply_text if self.reply_for is None else self.reply_for(body),
                    },
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": self.input_tokens,
                "completion_tokens": self.output_tokens,
                "total_tokens": self.input_tokens + self.output_tokens,
                "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
            }
            if self.prompt_cache is None
            else self.prompt_cache.openai_usage(body, self.output_tokens),
        }

    def anthropic_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        tool_choice = body.get("tool_choice") or {}
        content: list[dict[str, Any]]
        if tool_choice.get("type") == "tool":
            content = [
                {
                    "type": "tool_use",
                    "id": "toolu_fake",
                    "name": tool_choice["name"],
                    "input": json.loads(self.reply_text),
                }
            ]
            stop_reason = "tool_use"
        else:
            content = [{"type": "text", "text": self.reply_text}]
            stop_reason = "end_turn"
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "cache_read_input_tokens": self.cached_tokens,
                "cache_creation_input_tokens": self.cache_creation_tokens,
            }
            if self.prompt_cache is None
            else self.prompt_cache.anthropic_usage(body, self.output_tokens),
        }


def _error_body(path: str, status: int, message: str) -> dict[str, Any]:
    if path.endswith("/messages"):
        kind = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}
        return {"type": "error", "error": {"type": kind.get(status, "api_error"), "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error"}}


class _Handler(BaseHTTPRequestHandler):
    server_version = "FakeLLM/1.0"

    @property
    def fake(self) -> FakeLLMServer:
        fake: FakeLLMServer = self.server.fake  # type: ignore[attr-defined]
        return fake

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        if fake_batch_apis.serves(self.path):
            self._serve_batch_api(b"")
        else:
            self._send(404, json.dumps(_error_body(self.path, 404, f"no route GET {self.path}")).encode())

    def do_POST(self) -> None:
        raw = self._read_body()
        if fake_batch_apis.serves(self.path):
            self._serve_batch_api(raw)
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"unparsable": raw.decode(errors="replace")}
        seen = SeenRequest(
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            arrived=time.monotonic(),
        )
        fault = self.fake._record(seen)
        if self.fake._over_the_limit(scripted=fault is not None):
            fault = Fault.rate_limited(self.fake.throttle_retry_after)
        # The client may have given up already (its timeout ran out during a slow fault).
        try:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._answer(seen, fault)
        finally:
            with self.fake._lock:
                self.fake._answering -= 1

    def _answer(self, seen: SeenRequest, fault: Fault | None) -> None:
        if self.fake.latency_s:
            self.fake._sleep(self.fake.latency_s)
        if self._failed(seen.path, fault, _error_body):
            return
        if seen.path == "/v1/chat/completions":
            if self.fake.reject_response_format and "response_format" in seen.body:
                message = "response_format is not supported by this server"
                self._send(400, json.dumps(_error_body(seen.path, 400, message)).encode())
                return
            self._send(200, json.dumps(self.fake.openai_reply(seen.body)).encode())
        elif seen.path == "/v1/messages":
            self._send(200, json.dumps(self.fake.anthropic_reply(seen.body)).encode())
        elif _AZURE_CHAT.match(seen.path):
            self._answer_azure(seen)
        else:
            self._send(404, json.dumps(_error_body(seen.path, 404, f"no route {seen.path}")).encode())

    def _answer_azure(self, seen: SeenRequest) -> None:
        """Azure OpenAI's chat route: the version in the query, the key in ``api-key``, the served model named."""
        query = parse_qs(urlsplit(seen.path).query)
        if not query.get("api-version"):
            self._send(404, json.dumps({"error": {"code": "404", "message": "Resource not found"}}).encode())
        elif not seen.headers.get("api-key"):
            message = "Access denied due to invalid subscription key or wrong API endpoint."
            self._send(401, json.dumps({"error": {"code": "401", "message": message}}).encode())
        else:
            self._send(200, json.dumps(self.fake.openai_reply(seen.body) | {"model": self.fake.azure_model}).encode())

    def _failed(self, path: str, fault: Fault | None, error_body: Callable[[str, int, str], dict[str, Any]]) -> bool:
        """Hold while frozen, then play `fail_status` or the request's fault; True if that answered it."""
        self.fake._hold_while_frozen()
        if self.fake.fail_status is not None:
            status = self.fake.fail_status
            self._send(status, json.dumps(error_body(path, status, "the server is down")).encode())
            return True
        if fault is not None:
            if fault.kind == "drop":
                self.close_connection = True
                return True
            if fault.kind == "malformed":
                self._send(200, b'{"id": "chatcmpl-fake", "choices": [{"index": 0, "mess')
                return True
            if fault.kind == "status":
                payload = json.dumps(error_body(path, fault.status, fault.message)).encode()
                self._send(fault.status, payload, fault.headers)
                return True
            self.fake._sleep(fault.delay_s)  # "slow": then answer normally
        return False

    def _serve_batch_api(self, raw: bytes) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = {"multipart_bytes": len(raw)}
        if not isinstance(body, dict):
            body = {"json": body}
        seen = SeenRequest(path=self.path, headers=headers, body=body, arrived=time.monotonic())
        fault = self.fake._record(seen, batch=True)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if not self._failed(self.path, fault, fake_batch_apis.error_body):
                status, payload, content_type = self.fake._batch_apis.answer(self.command, self.path, headers, raw)
                self._send(status, payload, content_type=content_type)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        chunks = []
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            chunks.append(self.rfile.read(size))
            self.rfile.readline()  # the CRLF after the chunk
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
            pass
        return b"".join(chunks)

    def _send(
        self,
        status: int,
        payload: bytes,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


AZURE_API_VERSION = "2024-10-21"


@contextlib.contextmanager
def sdks_pointed_at(monkeypatch: Any, key: str) -> Iterator[FakeLLMServer]:
    """A running server, with the SDKs' keys and base URLs (OpenAI, Anthropic, Azure OpenAI's endpoint and API
    version) set to it for one test (``monkeypatch``), and the settings that would send anything else cleared."""
    with FakeLLMServer() as fake:
        for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY"):
            monkeypatch.setenv(name, key)
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.anthropic_base_url)
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", fake.azure_endpoint)
        monkeypatch.setenv("OPENAI_API_VERSION", AZURE_API_VERSION)
        cleared = ("ANTHROPIC_AUTH_TOKEN", "OPENAI_CUSTOM_HEADERS", "ANTHROPIC_CUSTOM_HEADERS", "AZURE_OPENAI_AD_TOKEN")
        for name in cleared:
            monkeypatch.delenv(name, raising=False)
        yield fake
