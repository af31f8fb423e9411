"""Blocking work (checks, grades: they may wait on a sandboxed program) off a role's event loop, bounded.

At most one call per CPU runs at once, so sandboxed programs do not starve each
other into false timeouts. A thread pool bounds it rather than an asyncio
semaphore: a role object may serve several event loops in turn (in-process, each
``asyncio.run`` is a new loop), and an asyncio primitive belongs to one.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class Workers:
    """A bounded pool of threads for one role's blocking calls."""

    def __init__(self, parallel: int | None = None, *, name: str = "redraft-role") -> None:
        self._pool = ThreadPoolExecutor(max_workers=parallel or os.cpu_count() or 1, thread_name_prefix=name)

    async def run(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``function(*args, **kwargs)`` in one of the pool's threads, awaited."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(function, *args, **kwargs))
