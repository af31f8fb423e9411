"""The middleware Ray Serve's proxy wraps its app in (`redraft.serving.proxy_middlewares`), against an ASGI app that
behaves as the proxy does when the replica holding a request is lost: it sends nothing, stops a started stream
short, or writes its own 503. The replica really killed is tests/integration/test_serve_replica_lost.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.middleware import Middleware

from redraft.serving import proxy_middlewares
from redraft.serving._proxy import LostReplica

Sent = list[dict[str, Any]]


def through(app: Any, path: str = "/v1/chat/completions") -> Sent:
    """What the client is sent when ``app`` answers a request through the middleware."""
    sent: Sent = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": path, "method": "POST", "headers": []}
    asyncio.run(LostReplica(app)(scope, receive, send))
    return sent


def headers(start: dict[str, Any]) -> dict[bytes, bytes]:
    return {bytes(name): bytes(value) for name, value in start["headers"]}


async def says_nothing(scope: Any, receive: Any, send: Any) -> None:
    """The proxy after its call to a dead replica failed before the response started."""


async def stops_a_stream(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": b": redraft: refining (none)\n\n", "more_body": True})


async def unavailable(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 503, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"no replica", "more_body": False})


async def answers(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"ok": true}', "more_body": False})


async def raises(scope: Any, receive: Any, send: Any) -> None:
    raise RuntimeError("the proxy's own failure")


def test_a_request_the_proxy_gave_no_answer_is_an_openai_503_with_retry_after() -> None:
    for app in (says_nothing, raises):
        start, body = through(app)
        assert start["status"] == 503 and headers(start)[b"retry-after"] == b"5"
        error = json.loads(body["body"])["error"]
        assert error["type"] == "service_unavailable" and "replica" in error["message"]
        assert int(headers(start)[b"content-length"]) == len(body["body"])


def test_a_stream_stopped_short_ends_with_an_error_event() -> None:
    start, progress, end = through(stops_a_stream)
    assert start["status"] == 200 and progress["more_body"]
    assert end["body"].startswith(b"data: ") and not end["more_body"]
    assert json.loads(end["body"][6:])["error"]["type"] == "service_unavailable"


def test_the_proxy_s_own_503_gets_a_retry_after_and_whole_answers_pass_unchanged() -> None:
    start, body = through(unavailable)
    assert start["status"] == 503 and headers(start)[b"retry-after"] == b"5" and body["body"] == b"no replica"
    start, body = through(answers)
    assert start["headers"] == [(b"content-type", b"application/json")] and body["body"] == b'{"ok": true}'


def test_the_proxy_callback_gives_ray_serve_a_list_of_starlette_middlewares() -> None:
    from ray.serve._private.http_util import validate_http_proxy_callback_return

    (middleware,) = validate_http_proxy_callback_return(proxy_middlewares())
    assert isinstance(middleware, Middleware) and middleware.cls is LostReplica
