"""A role's requests served in batches: the K requests of a round that go to one member cross in one call.

A hop between processes costs far more CPU than the work of routing a frame, so
the arbiter sends every request of a round bound for the same member together
(`redraft.engine.pools.RolePool.call_many`), and the member serves them
concurrently, exactly as it would serve them one by one. Each request keeps its
own frames and its own fate: one reply or one exception per request, in order.
An exception travels back inside the reply list, so one that cannot be pickled
travels as a `RuntimeError` naming it rather than failing the whole batch.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Awaitable, Callable
from typing import cast

from redraft.errors import describe

BATCHED = frozenset({"draft", "reflect", "critique", "verify"})
"""The role methods that can be called in batches: each takes one request frame and returns one reply frame."""


class Batching:
    """Mixed into a role: `batch` serves several requests of one method in one call."""

    async def batch(self, method: str, payloads: list[bytes]) -> list[bytes | BaseException]:
        """``method`` on each frame, concurrently; per request its reply frame or the exception it raised."""
        if method not in BATCHED:
            raise ValueError(f"{method!r} cannot be called in batches (only {', '.join(sorted(BATCHED))})")
        handler = cast(Callable[[bytes], Awaitable[bytes]], getattr(self, method))
        replies = await asyncio.gather(*(handler(p) for p in payloads), return_exceptions=True)
        return [r if isinstance(r, bytes) else _portable(r) for r in replies]


def _portable(exc: BaseException) -> BaseException:
    """``exc``, or a `RuntimeError` naming it when it cannot be pickled (it has to cross back to the arbiter)."""
    try:
        pickle.dumps(exc)
    except Exception:
        return RuntimeError(describe(exc))
    return exc
