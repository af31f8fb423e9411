"""The server ``redraft view`` runs: uvicorn on 127.0.0.1 by default, printing its URL.

A bind beyond loopback (``--host 0.0.0.0``, an address of the machine) serves only with an access token:
``--token``, or one generated here and printed in the URL. The socket is bound before uvicorn starts, so the
URL printed names the port actually bound (``--port 0`` picks a free one).
"""

from __future__ import annotations

import importlib
import ipaddress
import secrets
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from redraft.errors import UserError

if TYPE_CHECKING:
    from starlette.applications import Starlette

LOOPBACK = "127.0.0.1"
PORT = 8765
PATIENCE = 1.0
"""Seconds the server's pages wait for a long run's records: then they show what is read, and fill in."""


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def needs_the_extra() -> None:
    """`UserError` naming the ``view`` extra when its server libraries are not installed."""
    for name in ("starlette", "uvicorn"):
        try:
            importlib.import_module(name)
        except ImportError:
            raise UserError(
                f"redraft view needs the view extra ({name} is missing): pip install 'redraft[view]'"
            ) from None


def make_app(
    root: Path,
    *,
    token: str | None = None,
    clock: Callable[[], float] = time.monotonic,
    patience: float | None = None,
    host: str = LOOPBACK,
) -> Starlette:
    """The viewer over ``root`` as an ASGI app (``token``: every request must carry it; ``patience``: how long a
    page waits for a run's records, None until they are read)."""
    needs_the_extra()
    from redraft.viewer._app import Viewer
    from redraft.viewer._site import Site

    if not root.is_dir():
        raise UserError(f"{root} is not a directory: give the folder that holds your runs (default runs/)")
    return Viewer(Site(root, clock, patience), token=token, host=host).app()


def access_token(host: str, token: str | None) -> str | None:
    """The token a bind on ``host`` needs: None on loopback unless given; given or generated beyond it."""
    if token is not None and not token.strip():
        raise UserError("--token is empty: give a secret, or leave it out on loopback")
    if loopback(host):
        return token
    return token or secrets.token_urlsafe(18)


def serve(
    root: Path, *, host: str = LOOPBACK, port: int = PORT, token: str | None = None, say: Callable[[str], None] = print
) -> None:
    """Serve the viewer until interrupted; the URL (with the token, if any) is said first."""
    needs_the_extra()
    import uvicorn

    token = access_token(host, token)
    app = make_app(root, token=token, patience=PATIENCE, host=host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port} ({exc.strerror or exc}): give another --port") from None
    sock.listen(128)  # before the URL is said: a client that reads it may connect at once
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    say(
        f"redraft view: http://{shown}:{bound}/"
        + (f"?token={token}" if token else "")
        + f"  (serving {root}; Ctrl-C stops)"
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    server.run(sockets=[sock])
