"""The HTTP application: OpenAI's ``POST /v1/chat/completions`` and ``GET /v1/models``, as an ASGI app (FastAPI).

It runs the same under any ASGI server: as a Ray Serve deployment (`redraft.serving._deployment`), or under
uvicorn in one process (tests, benchmarks). Every refusal and failure is answered in OpenAI's error shape; a
request passes its key, its size, its settings and the server's budget before its loop starts.

A request's loop runs only while its client waits: a client that disconnects cancels it (the loop's model calls
with it), so nothing more is paid for an answer nobody reads. A loop is bounded by the server's request timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from redraft.errors import AuthenticationError, InfrastructureError
from redraft.protocols.messages import Message, Result
from redraft.serving._guard import CountedMetrics, Metrics, PeriodSpending, Spending, admit, authorize
from redraft.serving._log import ServerLog, log_path
from redraft.serving._openai import (
    DONE,
    APIError,
    ChatRequest,
    chunk,
    comment,
    completion,
    error_event,
    model_list,
    read_request,
)
from redraft.serving._refiner import Engines, Prepared, Refiner
from redraft.serving._replies import failure, machinery_error, openai_usage, redraft_object, stopped
from redraft.serving._routes import route, served_names
from redraft.serving._settings import ServeSettings

T = TypeVar("T")
CLIENT_GONE = 499
"""The status a request whose client disconnected is counted under (nginx's; nobody reads it)."""
WARNING_HEADER = "X-Redraft-Warning"
"""Names the codes of the response's ``redraft.warnings`` (e.g. ``no_check``), for a client that reads headers."""
OUTER_GRACE_S = 30.0
"""Past the request timeout, what a loop that did not stop itself is given before it is cut (a safety net)."""


class ClientGone(Exception):
    """The client disconnected while its loop ran: the loop was cancelled."""


class Server:
    """What the routes share: the settings, the engine, the money spent, the figures."""

    def __init__(
        self, settings: ServeSettings, spending: Spending | None, metrics: Metrics | None, engines: Engines | None
    ) -> None:
        settings.validate()
        self.settings = settings
        self.refiner = Refiner(settings, engines)
        self.spending = spending or PeriodSpending(settings.period_s)
        self.metrics = metrics or CountedMetrics()
        self.cancelled = 0
        """Loops cancelled because their client went away."""
        self.loop_cancelled = threading.Event()
        """Set when a loop was cancelled (tests wait on it from another thread)."""
        self.log = ServerLog(log_path(settings.out))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cut: asyncio.Event | None = None

    def started(self) -> None:
        """Called in the app's event loop as it starts: `cut` then reaches it from any thread."""
        self._loop, self._cut = asyncio.get_running_loop(), asyncio.Event()

    def cut(self) -> None:
        """Cut every loop still running (the server is stopping and its drain is over): each request is answered
        503 with ``Retry-After``, its loop cancelled and not recorded. Safe from any thread."""
        if self._loop is not None and self._cut is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed meanwhile: nothing left to cut
                self._loop.call_soon_threadsafe(self._cut.set)

    async def was_cut(self) -> None:
        """Returns once `cut` was called."""
        if self._cut is not None:
            await self._cut.wait()
        else:
            await asyncio.Event().wait()

    def admitted(self, request: Request, body: bytes) -> tuple[ChatRequest, Prepared]:
        """The request read and its loop prepared; `APIError` for the first thing it may not ask."""
        asked = read_request(body)
        chosen = route(asked.model, self.settings.aliases, self.refiner.own_models)
        admit(self.spending, self.settings.usd_per_period, self.settings.period_s)
        prepared = self.refiner.prepare(chosen, asked)
        for notice in prepared.notices:
            self.log.warning(prepared.task.task_id, notice.message)
        return asked, prepared

    async def finished(self, prepared: Prepared, trace: list[Message]) -> tuple[Result, str]:
        """The loop's result, its trace written and its cost counted; (the result, its run directory's name)."""
        result = trace[-1]
        assert isinstance(result, Result)
        run = await asyncio.to_thread(self.refiner.journal.write, prepared.task, trace, result)
        self.spending.add(result.usage.cost_usd)
        return result, run


def make_app(
    settings: ServeSettings,
    *,
    spending: Spending | None = None,
    metrics: Metrics | None = None,
    engines: Engines | None = None,
) -> FastAPI:
    """The application for ``settings``, its loops run by ``engines`` (default: roles in this process);
    `redraft.errors.UserError` for settings that cannot serve."""
    server = Server(settings, spending, metrics, engines)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        server.started()
        yield
        server.refiner.journal.close()
        server.refiner.engines.close()

    app = FastAPI(title="redraft", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.server = server

    @app.exception_handler(APIError)
    async def refused(request: Request, exc: APIError) -> Response:
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers())

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception) -> Response:  # a bug: still an answer the SDK can read
        error = APIError(500, f"the server failed: {type(exc).__name__}", "server_error")
        return JSONResponse(error.body(), status_code=500)

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        authorize(request.headers.get("authorization"), settings.key_digests)
        return JSONResponse(model_list(served_names(settings.aliases)))

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        return await _chat(server, request)

    return app


async def _chat(server: Server, request: Request) -> Response:
    started, status, calls, usd = time.monotonic(), 500, 0, 0.0
    try:
        authorize(request.headers.get("authorization"), server.settings.key_digests)
        asked, prepared = server.admitted(request, await _body(request, server.settings.max_request_bytes))
        if asked.stream:
            status = 0  # the stream counts itself, once it ends
            events = _events(server, asked, prepared, started)
            return StreamingResponse(events, media_type="text/event-stream", headers=_warned(prepared))
        try:
            trace = await _while_connected(request, _loop(server, prepared), server)
        except (InfrastructureError, AuthenticationError) as exc:
            raise machinery_error(exc) from None
        result, run = await server.finished(prepared, trace)
        calls, usd = result.usage.calls, result.usage.cost_usd
        problem = failure(result)
        if problem is not None:
            raise problem
        extra = redraft_object(result, prepared, run)
        body = completion(prepared.task.task_id, asked.model, result.text, openai_usage(result.usage), extra)
        status = 200
        return JSONResponse(body, headers=_warned(prepared))
    except APIError as exc:
        status = exc.status
        raise
    except ClientGone:
        status = CLIENT_GONE
        return Response(status_code=CLIENT_GONE)
    finally:
        if status:
            server.metrics.request("chat", status, time.monotonic() - started, calls, usd)


async def _body(request: Request, limit: int) -> bytes:
    """The request's body; `APIError` 413 past ``limit`` bytes (said by its length, or found while reading)."""
    too_large = APIError(413, f"the request is larger than this server's {limit} bytes", code="request_too_large")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            raise too_large
    return bytes(body)


async def _loop(server: Server, prepared: Prepared) -> list[Message]:
    """Every message of the request's loop, `Result` last; bounded past the request timeout as a safety net."""
    trace: list[Message] = []
    async with asyncio.timeout(server.settings.request_timeout_s + OUTER_GRACE_S):
        async for checkpoint in server.refiner.refine(prepared):
            trace += checkpoint.messages
    return trace


async def _while_connected(request: Request, work: Awaitable[T], server: Server) -> T:
    """``work``'s result; cancelled, and `ClientGone` raised, when the client disconnects first."""
    doing = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnect(request))
    cut = asyncio.ensure_future(server.was_cut())
    try:
        await asyncio.wait((doing, gone, cut), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        cut.cancel()
        if not doing.done():
            doing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await doing
            server.cancelled += 1
            server.loop_cancelled.set()
    if doing.cancelled() and cut.done() and not cut.cancelled():
        raise stopped()
    if doing.cancelled():
        raise ClientGone()
    return doing.result()


async def _disconnect(request: Request) -> None:
    """Returns when the client has disconnected (the ASGI server says so once the body has been read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _events(server: Server, asked: ChatRequest, prepared: Prepared, started: float) -> AsyncIterator[bytes]:
    """The stream: progress as SSE comments while the loop runs, then the answer as chunks, then ``[DONE]``."""
    status, calls, usd = 200, 0, 0.0
    try:
        async for event in _stream(server, asked, prepared):
            if isinstance(event, Result):
                calls, usd = event.usage.calls, event.usage.cost_usd
            elif isinstance(event, APIError):
                status = event.status
                yield error_event(event)
            else:
                yield event
        yield DONE
    except (asyncio.CancelledError, GeneratorExit):
        status = CLIENT_GONE
        server.cancelled += 1
        server.loop_cancelled.set()
        raise
    finally:
        server.metrics.request("chat", status, time.monotonic() - started, calls, usd)


async def _stream(server: Server, asked: ChatRequest, prepared: Prepared) -> AsyncIterator[bytes | Result | APIError]:
    """`_events`' content: comments and chunks, the `Result` (to count), or the error that ends the stream."""
    request_id, model = prepared.task.task_id, asked.model
    trace: list[Message] = []
    yield comment(f"redraft: refining ({prepared.strategy})")
    for notice in prepared.notices:
        yield comment(f"redraft: warning: {notice.message}")
    try:
        async for checkpoint in _until_cut(server, server.refiner.refine(prepared)):
            trace += checkpoint.messages
            if not checkpoint.last:
                yield comment(f"redraft: round done, {len(trace)} messages so far")
    except (InfrastructureError, AuthenticationError) as exc:
        yield machinery_error(exc)
        return
    except APIError as exc:  # cut: the server stopped before the loop finished
        yield exc
        return
    result, run = await server.finished(prepared, trace)
    yield result
    problem = failure(result)
    if problem is not None:
        yield problem
        return
    yield chunk(request_id, model, {"role": "assistant", "content": ""})
    for piece in _pieces(result.text):
        yield chunk(request_id, model, {"content": piece})
    yield chunk(request_id, model, {}, "stop", redraft=redraft_object(result, prepared, run))
    if asked.stream_options is not None and asked.stream_options.include_usage:
        yield chunk(request_id, model, {}, usage=openai_usage(result.usage))


async def _until_cut(server: Server, items: AsyncIterator[T]) -> AsyncIterator[T]:
    """``items`` until the server cuts its loops (`Server.cut`): then they stop, and `stopped` is raised."""
    cut = asyncio.ensure_future(server.was_cut())
    step: asyncio.Future[T] | None = None
    try:
        while True:
            step = asyncio.ensure_future(anext(items))
            await asyncio.wait((step, cut), return_when=asyncio.FIRST_COMPLETED)
            if not step.done():
                raise stopped()
            try:
                item = step.result()
            except StopAsyncIteration:
                return
            yield item
    finally:  # cut, or the client gone (this generator cancelled): the loop stops with it
        cut.cancel()
        if step is not None and not step.done():
            step.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await step


def _warned(prepared: Prepared) -> dict[str, str]:
    """The response's ``X-Redraft-Warning`` header: the codes of the server's warnings about the request."""
    codes = ", ".join(notice.code for notice in prepared.notices)
    return {WARNING_HEADER: codes} if codes else {}


def _pieces(text: str, size: int = 64) -> list[str]:
    """The answer in pieces of about ``size`` characters, cut after whitespace (each a chunk's content)."""
    pieces, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        cut = text.rfind(" ", start + 1, end) + 1 if end < len(text) else end
        end = cut if cut > start else end
        pieces.append(text[start:end])
        start = end
    return pieces


def app_state(app: FastAPI) -> Any:
    """The `Server` behind an app made by `make_app` (tests read its figures)."""
    return app.state.server
