"""The server's log: one file, ``OUT/serve.log``, for what an operator reads after the fact and no client sees.

Ray's and Ray Serve's own messages (start-up warnings, deployment steps, relayed worker lines) go there rather
than to the terminal, where ``redraft serve`` prints only its own lines: where it listens, how it stops, what
it served. The server's warnings about a request (a loop that cannot do what its strategy is for) go there too,
each a line that names the request. Every replica appends whole lines, so replicas on one node share the file.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from redraft.serving._journal import DEFAULT_OUT

LOG_NAME = "serve.log"
logger = logging.getLogger("redraft.serving")


def log_path(out: str | None) -> Path:
    """Where the server's log is for ``--out`` ``out``."""
    return (Path(out) if out else DEFAULT_OUT) / LOG_NAME


class ServerLog:
    """Lines appended to the server's log (the ``redraft.serving`` logger says only that it cannot); thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def warning(self, request_id: str, message: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        line = f"{stamp} WARNING redraft.serving: {request_id}: {' '.join(message.split())}\n"
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as log:
                    log.write(line)
            except OSError as exc:  # the answer matters more than its log line
                logger.warning("cannot write the server's log %s: %s", self.path, exc.strerror)
