"""Ctrl-C and SIGTERM as a request to stop: the run ends at once, cleanly, and the exit code says so.

While a long command runs, the first SIGINT or SIGTERM sets the run's stop event
(`redraft.actors.run` and every lane of a comparison watch it): dispatching
stops, the tasks in flight are cancelled, what landed is kept, and the command
exits 130 (SIGINT) or 143 (SIGTERM) with one line saying how many tasks are done.
A second signal ends the process at once, with the same code, for a user who will
not wait the second that takes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

EXIT_INTERRUPTED = 130
"""128 + SIGINT, as shells report a command Ctrl-C ended."""


@dataclass
class StopRequest:
    """The stop event a run watches, and the signal that set it (None while no signal came)."""

    event: threading.Event = field(default_factory=threading.Event)
    signum: int | None = None

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or signal.SIGINT)


@contextmanager
def stop_on_signals(said: str = "tasks in flight are not recorded") -> Iterator[StopRequest]:
    """SIGINT and SIGTERM set the yielded request's event while the block runs (the main thread only); ``said``
    is what the line printed on the first one says of the work in flight."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        if request.signum is not None:  # the second signal: the user will not wait
            os._exit(128 + signum)
        request.signum = signum
        request.event.set()
        print(f"redraft: {signal.Signals(signum).name}: stopping; {said}", file=sys.stderr, flush=True)

    previous: dict[int, Any] = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield request
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
