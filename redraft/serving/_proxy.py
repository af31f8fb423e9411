"""What Ray Serve's HTTP proxy answers when the replica holding a request is lost: a 503 in OpenAI's shape with
``Retry-After``, never a bare 500 nor a stream that stops without a word.

A replica killed mid-request (its process, its node) fails the proxy's call to it with Ray's actor error. The
proxy then sends nothing for a response not yet started (its ASGI server makes that a plain-text 500, which an
OpenAI client retries blind) and stops a started stream short. This middleware, which the proxy loads through
``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`` (`PROXY_CALLBACK`), answers the first with OpenAI's 503 and a
``Retry-After`` that an OpenAI client honours before asking again (another replica, or this one restarted,
answers), and ends the second with an error event, which an OpenAI client raises. A 503 the proxy writes itself
(no replica ready) gets a ``Retry-After`` too. It sees only what the proxy sends: the app's own answers pass
unchanged.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from redraft.serving._openai import APIError, error_event
from redraft.serving._replies import RETRY_AFTER_S

PROXY_CALLBACK_VARIABLE = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
PROXY_CALLBACK = "redraft.serving:proxy_middlewares"
"""The variable Ray Serve's proxy reads when it starts (from its node's environment), and redraft's value."""

log = logging.getLogger(__name__)


def replica_lost() -> APIError:
    return APIError(
        503,
        "the replica serving this request was lost; ask again",
        "service_unavailable",
        retry_after_s=RETRY_AFTER_S,
    )


class LostReplica:
    """The proxy's app, with an OpenAI-shaped 503 for a request whose replica gave no (or no whole) answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        seen = _Seen(send)
        try:
            await self.app(scope, receive, seen.send)
        except Exception:
            log.exception("the proxy failed a request")  # answered below, as a lost replica
        await seen.finish()


class _Seen:
    """What the proxy sent of one response: started, a stream, ended."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = self.stream = self.ended = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            headers = [(bytes(name).lower(), bytes(value)) for name, value in message.get("headers", [])]
            self.stream = any(n == b"content-type" and v.startswith(b"text/event-stream") for n, v in headers)
            if message["status"] == 503 and all(n != b"retry-after" for n, _ in headers):
                message = {**message, "headers": [*headers, (b"retry-after", str(RETRY_AFTER_S).encode())]}
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.ended = True
        await self._send(message)

    async def finish(self) -> None:
        """The answer the proxy did not give: all of it, or the end of a stream."""
        if self.ended:
            return
        error = replica_lost()
        if not self.started:
            await self._respond(error)
        elif self.stream:
            await self._send({"type": "http.response.body", "body": error_event(error), "more_body": False})

    async def _respond(self, error: APIError) -> None:
        body = msgspec.json.encode(error.body())
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        headers += [(name.lower().encode(), value.encode()) for name, value in error.headers().items()]
        await self._send({"type": "http.response.start", "status": error.status, "headers": headers})
        await self._send({"type": "http.response.body", "body": body, "more_body": False})


def proxy_middlewares() -> list[Any]:
    """Ray Serve's proxy callback (`PROXY_CALLBACK`): the middlewares its HTTP app is wrapped in."""
    return [Middleware(LostReplica)]
