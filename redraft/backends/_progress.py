"""Waiting on a call that is slow but alive: it fails only when what serves it stops making progress.

Invariant: `await_progressing` returns the call's result however long it takes, as long as the server's
``progress()`` grows at least once every ``stall_s``; it raises `BackendUnavailableError` (the machinery's
failure: the task is redone, never recorded) only after ``stall_s`` with no growth, asking for progress
going unanswered counting as none. A fixed deadline fails a run on a busy machine, where the embedded
model decodes at a fifth of a core and a call waits minutes behind the others: slow is not failed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from redraft.errors import BackendUnavailableError

T = TypeVar("T")

POLL_S = 15.0
"""How often a waiting call asks for progress."""
STALL_S = 300.0
"""How long a server may decode nothing before its calls fail: a decode step takes milliseconds on a quiet
machine and seconds on the busiest seen (load 30 on 2 cores), so five minutes of none is a hang."""


async def await_progressing(
    call: Awaitable[T],
    progress: Callable[[], Awaitable[int]],
    *,
    what: str,
    poll_s: float = POLL_S,
    stall_s: float = STALL_S,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``call``'s result, waited for as long as ``progress()`` keeps growing (see the module docstring)."""
    task = asyncio.ensure_future(call)
    last: int | None = None
    since = clock()
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=poll_s)
            if done:
                return task.result()
            now = await _asked(progress, poll_s)
            if now is not None and now != last:
                last, since = now, clock()
            elif clock() - since >= stall_s:
                raise BackendUnavailableError(
                    f"{what}: the model made no progress for {stall_s:g} s (its host hung?)", endpoint=what
                )
    finally:
        if not task.done():
            task.cancel()


async def _asked(progress: Callable[[], Awaitable[int]], within_s: float) -> int | None:
    """The server's progress, or None when it does not say within ``within_s`` (or cannot: it is gone)."""
    try:
        return await asyncio.wait_for(progress(), within_s)
    except Exception:  # a host that died fails the call itself, with its own cause
        return None
