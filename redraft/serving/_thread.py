"""The app served from a thread of this process, for a notebook, a script or a test: uvicorn on a socket of
127.0.0.1 (a free port unless the settings name one), stopped when the block ends, its requests drained."""

from __future__ import annotations

import asyncio
import contextlib
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
    import uvicorn

    if settings.host not in ("127.0.0.1", "localhost"):
        settings = msgspec.structs.replace(settings, host="127.0.0.1")
    app = make_app(settings)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Inherited by each accepted connection: without it a kept-alive client's every answer waited about 40 ms
    # (Nagle's algorithm holding the body behind the headers until the client's delayed ACK).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", settings.port))
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=None if drain_s is None else int(drain_s)
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True, name="serve")
    thread.start()
    try:
        _started(server, thread)
        yield Serving(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", app, server)
    finally:
        server.should_exit = True
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
