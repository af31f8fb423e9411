"""The app served from a thread of this process: for a notebook, a script or a test, uvicorn on a socket of
127.0.0.1 (a free port unless the settings name one), stopped when the block ends, its requests drained; and
``redraft serve --in-process``, on the settings' host until its stop event is set, drained for ``drain_s``."""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from redraft.errors import UserError
from redraft.serving._app import Server, make_app
from redraft.serving._settings import ServeSettings

STARTED_WITHIN_S = 60.0
CUT_GRACE_S = 10
"""Past the drain, how long a cut request has to send its 503 before uvicorn cancels it outright."""


@dataclass(frozen=True)
class Serving:
    """A running app: its base URL (``http://127.0.0.1:PORT/v1``), the app, and the uvicorn server under it."""

    base_url: str
    app: Any
    uvicorn: Any

    @property
    def state(self) -> Server:
        """What the app's requests share (its figures, its engine)."""
        server: Server = self.app.state.server
        return server


@contextlib.contextmanager
def serving(settings: ServeSettings, *, drain_s: float | None = None) -> Iterator[Serving]:
    """``settings`` served on loopback in a thread of this process until the block ends (``port`` 0: a free one);
    ``drain_s``: how long the requests in flight may take to finish when it ends."""
    if settings.host not in ("127.0.0.1", "localhost"):
        settings = msgspec.structs.replace(settings, host="127.0.0.1")
    with _served(settings, "127.0.0.1", drain_s) as (app, server, port):
        yield Serving(f"http://127.0.0.1:{port}/v1", app, server)


def serve_until(settings: ServeSettings, stop: threading.Event) -> None:
    """Serve ``settings`` on its host and port from a thread of this process until ``stop`` is set, then stop
    taking requests and give those in flight ``settings.drain_s`` seconds to finish (``--in-process``)."""
    with _served(settings, settings.host, settings.drain_s) as (_, _, port):
        print(f"redraft serve: listening on http://{settings.host}:{port}/v1", flush=True)
        stop.wait()


@contextlib.contextmanager
def _served(settings: ServeSettings, host: str, drain_s: float | None) -> Iterator[tuple[Any, Any, int]]:
    """The app of ``settings`` under uvicorn in a thread, on ``host`` and the settings' port: (the app, the
    uvicorn server, the port), until the block ends; uvicorn sets no signal handler off the main thread."""
    import uvicorn

    app = make_app(settings)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Inherited by each accepted connection: without it a kept-alive client's every answer waited about 40 ms
    # (Nagle's algorithm holding the body behind the headers until the client's delayed ACK).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, settings.port))
    # uvicorn's own cut, past ours (`Server.cut`), for a request that would not stop: whole seconds, 0 means none
    drain = None if drain_s is None else math.ceil(drain_s) + CUT_GRACE_S
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=drain)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True, name="serve")
    thread.start()
    try:
        _started(server, thread)
        yield app, server, int(sock.getsockname()[1])
    finally:
        server.should_exit = True
        if drain_s is not None:
            thread.join(timeout=drain_s)  # the requests in flight finish meanwhile, or are cut
            if thread.is_alive():
                app.state.server.cut()
        thread.join(timeout=(drain_s or 0) + 30)
        sock.close()


def _started(server: Any, thread: threading.Thread) -> None:
    waited = threading.Event()
    for _ in range(int(STARTED_WITHIN_S / 0.01)):
        if server.started:
            return
        if not thread.is_alive():
            break
        waited.wait(0.01)
    raise UserError("the app did not start: see the log above")
