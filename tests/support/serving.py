"""A served app on a real socket: `make_app` under uvicorn on 127.0.0.1 in a thread of this process, and the
scripted model and check its tests name by module path.

The scripted model answers a draft with "Attempt R: 41" until the request's revision round reaches 2, then with
"Attempt R: 42" (R the round); a critique is one critical issue. The check `says_42` passes an answer holding
42, so a request checked by it takes rounds 0, 1 and 2 and passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn

from redraft.backends.base import ChatRequest
from redraft.serving import ServeSettings, make_app
from tests.support.replies import CRITIQUE, is_critique, round_of

SCRIPTED = "scripted:tests.support.serving:learner"
CHECK = "tests.support.serving:says_42"


def learner(request: ChatRequest) -> str:
    if is_critique(request):
        return json.dumps(CRITIQUE)
    r = round_of(request)
    return f"Attempt {r}: {42 if r >= 2 else 41}"


def says_42(text: str, data: dict[str, Any], prompt: str) -> tuple[bool, str]:
    """Passes an answer that holds 42 (or ``data["expected"]``); the prompt must be the request's."""
    expected = str(data.get("expected", 42))
    assert "[user]" in prompt or prompt, "the check sees the request's messages as its prompt"
    return expected in text, f"the answer is not {expected}"


@dataclass
class Served:
    """A running app: its base URL (``.../v1``) and the app (its `Server` in ``app.state.server``)."""

    base_url: str
    app: Any
    server: uvicorn.Server

    @property
    def state(self) -> Any:
        return self.app.state.server


@contextlib.contextmanager
def served(settings: ServeSettings, **graceful: Any) -> Iterator[Served]:
    """``make_app(settings)`` under uvicorn on a free port of 127.0.0.1 until the block ends."""
    app = make_app(settings)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", lifespan="on", **graceful)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the app did not start")
        threading.Event().wait(0.01)
    try:
        yield Served(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", app, server)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
