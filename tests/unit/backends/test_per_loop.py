"""One SDK client per event loop: an aiohttp session must not be used from a loop other than its own."""

from __future__ import annotations

import asyncio

from redraft.backends.base import PerLoop


def test_one_client_per_running_loop_made_on_first_use() -> None:
    made: list[object] = []

    def make() -> object:
        made.append(object())
        return made[-1]

    clients = PerLoop(make)

    async def twice() -> tuple[object, object]:
        return clients.get(), clients.get()

    first, again = asyncio.run(twice())
    assert first is again
    other, _ = asyncio.run(twice())  # a new loop: a client of its own
    assert other is not first
    assert made == [first, other]
