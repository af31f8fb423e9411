"""A served request's loop on the cluster's role actors: what ``redraft serve`` runs each request on under Ray.

A replica holds one `Fleets` for every run configuration its requests ask for, and leases it per configuration
(`FleetArbiter`, made once and kept, as the engine's `Arbiter` is kept in one process): the configuration is
opened on the fleet's arbiters and its roles made in the fleet's members, so each request is a task streamed
from an arbiter actor, its model calls made by role actors that share the endpoint limiter, the response cache
and the prices with every other run on the cluster. What the replica reads back is what the engine's `Arbiter`
yields in one process: a `Checkpoint` per finished round, the same messages (decoded from the frames).

See docs/architecture.md, section "A served request's lease on a fleet".
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from typing import Any

from redraft.actors._fleet import Fleet
from redraft.actors._leases import Fleets, Lease
from redraft.engine import Checkpoint
from redraft.engine.resolution import ResolvedRun
from redraft.errors import InfrastructureError, cause_of, machinery_failure
from redraft.protocols.messages import Task, decode, encode


class FleetArbiter:
    """One run configuration of a replica, leased on its fleet: `refine` as the engine's `Arbiter` offers it."""

    def __init__(self, fleets: Fleets, run: ResolvedRun) -> None:
        self._fleets, self._run = fleets, run
        self._lease: Lease | None = None
        self._leasing = asyncio.Lock()
        self._turns = itertools.count()
        self._beating: asyncio.Future[None] | None = None
        self._asking = 0
        """Requests of this configuration under way (none: it may go idle)."""
        self._last = time.monotonic()

    async def _leased(self) -> Lease:
        async with self._leasing:
            if self._lease is None:
                run = self._run
                self._lease = await asyncio.to_thread(self._fleets.lease, run.cast, run.settings)
                self._beating = asyncio.ensure_future(self._tend(self._lease))
            return self._lease

    async def _tend(self, lease: Lease) -> None:
        """The fleet's heartbeat while the configuration holds its lease, requests or none: an actor found dead is
        replaced (an arbiter too) before a request is sent to it, and one frozen is killed (`redraft.actors._fleet`);
        and, given an idle time, the lease let go once no request has come for that long."""
        idle_s = self._fleets.idle_s
        while True:
            await asyncio.to_thread(lease.check)
            await asyncio.sleep(Fleet.heartbeat_s if idle_s is None else max(min(Fleet.heartbeat_s, idle_s), 0.1))
            if idle_s is not None and await self._let_go(lease, idle_s):
                return

    async def _let_go(self, lease: Lease, idle_s: float) -> bool:
        async with self._leasing:
            if self._asking or self._lease is not lease or time.monotonic() - self._last < idle_s:
                return False
            self._lease = self._beating = None
            await asyncio.to_thread(self._fleets.release, lease)
            return True

    async def refine(self, task: Task, timeout_s: float | None = None) -> AsyncIterator[Checkpoint]:
        """``task``'s loop on an arbiter actor of the fleet, a checkpoint per finished round."""
        self._asking += 1
        try:
            async for checkpoint in self._refine(task, timeout_s):
                yield checkpoint
        finally:
            self._asking -= 1
            self._last = time.monotonic()

    async def _refine(self, task: Task, timeout_s: float | None) -> AsyncIterator[Checkpoint]:
        lease = await self._leased()
        slot = next(self._turns) % len(lease.arbiters)
        arbiter = lease.arbiters[slot]
        stream = arbiter.stream.options(num_returns="streaming").remote(
            encode(task), timeout_s, "task_timeout", None, lease.key
        )
        try:
            async for ref in stream:
                frames, pairs, last = await ref
                yield Checkpoint([decode(frame) for frame in frames], list(pairs), last)
        except (asyncio.CancelledError, GeneratorExit):
            _cancel(stream)
            raise
        except Exception as exc:
            failure = machinery_failure(exc)
            if failure is None:
                raise
            if not isinstance(cause_of(exc), InfrastructureError):  # not raised by a live arbiter: it died
                await asyncio.to_thread(lease.arbiter_lost, slot, arbiter)
                lost = f"the arbiter actor running the loop died ({failure})"
                raise InfrastructureError(lost, cause=failure.cause, fault=failure.fault) from None
            raise failure from None

    def close(self) -> None:
        """The configuration is let go: closed on the fleet (its actors stay for the others)."""
        if self._beating is not None:
            self._beating.cancel()
        if self._lease is not None:
            self._fleets.release(self._lease)
            self._lease = None


def _cancel(stream: Any) -> None:
    import ray

    ray.cancel(stream)


class FleetArbiters:
    """A replica's `FleetArbiter` per run configuration, on one shared fleet (stopped once idle for ``idle_s``,
    when given); `close` stops the fleet."""

    def __init__(self, fleets: Fleets | None = None, *, idle_s: float | None = None) -> None:
        self.fleets = fleets or Fleets(shared=True, idle_s=idle_s)

    def make(self, run: ResolvedRun) -> FleetArbiter:
        return FleetArbiter(self.fleets, run)

    def release(self, arbiter: FleetArbiter) -> None:
        arbiter.close()

    def close(self) -> None:
        self.fleets.shutdown()
