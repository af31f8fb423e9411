"""The members of each role an arbiter calls, and how a call reaches one of them.

A pool holds Ray actor handles on a cluster, or plain role objects in-process;
calls cross as encoded frames either way (`redraft.runtime.call`), so the arbiter's
code is the same in both.

A call goes to member ``index mod n``. When that member fails as a member (its
actor, worker or node died, or the call passed the pool's deadline), the same
request goes to the next member, and so on round the pool: an arbiter routes
around a dead member instead of losing the sample. The request is the same bytes
(its seed included), so another member gives the answer the first would have.
Only when every member failed does the call fail, as an `InfrastructureError`
(the task is then redone by the driver). The driver replaces members that died
for good (`redraft.actors.fleet`) and tells each arbiter with `replace`; a slot that
could not be refilled holds None and is skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from redraft.actors.failures import infrastructure_failure, member_failure
from redraft.errors import CallTimeoutError, InfrastructureError
from redraft.runtime import call

Reply = bytes | BaseException
"""A member's answer to one request of a batch: the reply frame, or what that request alone raised."""

ROLE_CALL_DEADLINE_S = 900.0
"""How long one role call may take before its member counts as hung. Above any backend's own worst case
(the HTTP clients' timeout times their attempts, with backoff), so it only ever cuts a call nothing else will."""


class RolePool:
    """The members of one role. Calls cross as bytes, to Ray actor handles or plain objects."""

    def __init__(
        self, members: Sequence[Any], *, role: str = "", deadline_s: float | None = ROLE_CALL_DEADLINE_S
    ) -> None:
        if not members:
            raise ValueError("a role pool needs at least one member")
        self.members: list[Any] = list(members)
        self.role = role
        self.deadline_s = deadline_s

    def replace(self, index: int, member: Any) -> None:
        """Put ``member`` (or None: no member) in slot ``index``, in place of one that died."""
        self.members[index] = member

    async def call(self, method: str, payload: bytes, index: int, waiting: list[Any] | None = None) -> bytes:
        """Call ``method`` of member ``index`` (modulo the pool's size) with one frame; its reply frame.

        A member that fails as a member is routed around (see the module docstring). While the call
        waits, its member is listed in ``waiting``; a call cancelled from outside (a task's timeout)
        leaves it listed, so whoever cut it can ask whether that member still answers.
        """
        reply: bytes = await self._route(method, index, waiting, lambda member: call(member, method, payload))
        return reply

    async def call_many(
        self, method: str, payloads: Sequence[bytes], indices: Sequence[int], waiting: list[Any] | None = None
    ) -> list[Reply]:
        """Each frame to member ``indices[i]`` (modulo the pool's size), as `call` would, but one call per member
        (its `redraft.actors.batches.Batching.batch`): a round of K samples costs one hop per member, not K.

        Each reply is the frame, or the exception its own request raised (one sample's failure is not its
        batch's). A member that fails as a member is routed around with its whole batch; when every member
        failed, each of its requests gets the `InfrastructureError`.
        """
        groups: dict[int, list[int]] = {}
        for position, index in enumerate(indices):
            groups.setdefault(index % len(self.members), []).append(position)
        replies: list[Reply] = [b""] * len(payloads)

        async def send(start: int, positions: list[int]) -> None:
            batch = [payloads[p] for p in positions]
            try:
                got: list[Reply] = await self._route(method, start, waiting, lambda m: call(m, "batch", method, batch))
            except Exception as exc:
                got = [exc] * len(positions)
            for position, reply in zip(positions, got, strict=True):
                replies[position] = reply

        await asyncio.gather(*(send(start, positions) for start, positions in groups.items()))
        return replies

    async def _route(
        self, method: str, index: int, waiting: list[Any] | None, send: Callable[[Any], Awaitable[Any]]
    ) -> Any:
        """``send(member)`` to member ``index``, then round the pool past members that fail as members."""
        waiting = [] if waiting is None else waiting
        n = len(self.members)
        failures: list[BaseException] = []
        for step in range(n):
            member = self.members[(index + step) % n]
            if member is None:
                continue
            waiting.append(member)
            try:
                reply = await asyncio.wait_for(send(member), self.deadline_s)
                waiting.remove(member)
                return reply
            except asyncio.CancelledError:
                raise
            except TimeoutError:
                waiting.remove(member)
                failures.append(
                    CallTimeoutError(f"{self.role or method} call passed its {self.deadline_s:g} s deadline")
                )
            except Exception as exc:
                waiting.remove(member)
                if not member_failure(exc):
                    raise
                failures.append(exc)
        last = failures[-1] if failures else None
        if last is None:
            raise InfrastructureError(f"no live {self.role or 'role'} member", cause="NoMemberError", role=self.role)
        failure = infrastructure_failure(last, role=self.role)
        assert failure is not None
        raise InfrastructureError(
            f"every {self.role or 'role'} member failed ({len(failures)} tried): {failure}",
            cause=failure.cause,
            role=self.role,
        )


@dataclass(frozen=True)
class Roles:
    """The role pools an arbiter calls; a critic pool exists only if the strategy needs it."""

    drafter: RolePool
    verifier: RolePool
    critic: RolePool | None = None
    self_critic: RolePool | None = None

    def pools(self) -> list[RolePool]:
        return [p for p in (self.drafter, self.verifier, self.critic, self.self_critic) if p is not None]

    def by_name(self) -> dict[str, RolePool]:
        """Each pool by its role's name."""
        named = {
            "drafter": self.drafter,
            "verifier": self.verifier,
            "critic": self.critic,
            "self_critic": self.self_critic,
        }
        return {name: pool for name, pool in named.items() if pool is not None}
