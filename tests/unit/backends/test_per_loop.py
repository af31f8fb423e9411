"""One client per event loop: an aiohttp session must not be used from a loop other than its own, nor outlive it."""

from __future__ import annotations

import asyncio

from redraft.backends.base import PerLoop


class Client:
    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def test_one_client_per_running_loop_made_on_first_use() -> None:
    made: list[Client] = []

    def make() -> Client:
        made.append(Client())
        return made[-1]

    clients = PerLoop(make)

    async def twice() -> tuple[Client, Client]:
        return clients.get(), clients.get()

    first, again = asyncio.run(twice())
    assert first is again
    other, _ = asyncio.run(twice())  # a new loop: a client of its own
    assert other is not first
    assert made == [first, other]


def test_a_loop_that_shuts_down_closes_its_client() -> None:
    """`asyncio.run` per call (the in-process API) must not leave a session, and its connections, open."""
    clients = PerLoop(Client)

    async def use() -> Client:
        client = clients.get()
        await asyncio.sleep(0)
        assert not client.closed and clients.get() is client
        return client

    first = asyncio.run(use())
    assert first.closed
    second = asyncio.run(use())
    assert second is not first and second.closed
