"""The members of each role an arbiter calls, and how a call reaches one of them.

A member serves typed requests (`Member`): in one process it is the role object
itself behind a `LocalMember`; on a cluster the actor system puts a Ray actor
behind the same interface (`redraft.actors._members`), encoding and decoding at the
actor boundary. The arbiter's code is the same in both.

A call goes to member ``index mod n``. When that member fails as a member (its
actor, worker or node died, or the call passed the pool's deadline:
`redraft.errors.member_failure`), the same requests go to the next member, and so
on round the pool: an arbiter routes around a dead member instead of losing the
sample. The requests are the same (their seeds included), so another member gives
the answers the first would have. Only when every member failed does the call
fail, as an `InfrastructureError` (the task is then redone by the driver). The
driver replaces members that died for good and tells each arbiter with
`RolePool.replace`; a slot that could not be refilled holds None and is skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from redraft.errors import CallTimeoutError, InfrastructureError, machinery_failure, member_failure
from redraft.protocols.messages import (
    Critique,
    CritiqueRequest,
    Draft,
    DraftRequest,
    Grade,
    GradeRequest,
    Reflection,
    ReflectRequest,
    RoleName,
    Verification,
    VerifyRequest,
)

Request = DraftRequest | ReflectRequest | CritiqueRequest | VerifyRequest | GradeRequest
"""What a role is asked: each kind is served by one role."""
Reply = Draft | Reflection | Critique | Verification | Grade
Outcome = Reply | BaseException
"""A member's answer to one request of a batch: the reply, or what that request alone raised."""

ROLE_CALL_DEADLINE_S = 900.0
"""How long one role call may take before its member counts as hung. Above any backend's own worst case
(the HTTP clients' timeout times their attempts, with backoff), so it only ever cuts a call nothing else will."""


class Role(Protocol):
    """A role of the loop: typed requests in, typed replies out (`redraft.engine.drafter` and the others)."""

    async def serve(self, request: Request) -> Reply:
        """The reply to ``request``; an exception when this request failed (a model error, a check that raised)."""
        ...


class Member(Protocol):
    """One member of a role's pool, wherever it runs."""

    async def serve_many(self, requests: Sequence[Request]) -> list[Outcome]:
        """Each request served (concurrently), in order: its reply or its own exception; raises only when the
        member itself failed (it died, it is gone)."""
        ...

    async def answers(self, within_s: float) -> bool:
        """Whether the member still answers (its event loop runs) within ``within_s``."""
        ...


class LocalMember:
    """A role object of this process as a member."""

    def __init__(self, role: Role) -> None:
        self.role = role

    async def serve_many(self, requests: Sequence[Request]) -> list[Outcome]:
        replies = await asyncio.gather(*(self.role.serve(r) for r in requests), return_exceptions=True)
        return list(replies)

    async def answers(self, within_s: float) -> bool:
        return True


class RolePool:
    """The members of one role."""

    def __init__(
        self, members: Sequence[Member | None], *, role: RoleName, deadline_s: float | None = ROLE_CALL_DEADLINE_S
    ) -> None:
        if not members:
            raise ValueError("a role pool needs at least one member")
        self.members: list[Member | None] = list(members)
        self.role: RoleName = role
        self.deadline_s = deadline_s

    def replace(self, index: int, member: Member | None) -> None:
        """Put ``member`` (or None: no member) in slot ``index``, in place of one that died."""
        self.members[index] = member

    async def call_many(
        self, requests: Sequence[Request], indices: Sequence[int], waiting: list[Member] | None = None
    ) -> list[Outcome]:
        """Each request to member ``indices[i]`` (modulo the pool's size), one call per member: a round of K
        samples costs one hop per member, not K.

        Each outcome is the reply, or the exception its own request raised (one sample's failure is not its
        batch's). A member that fails as a member is routed around with its whole batch (see the module
        docstring); when every member failed, each of its requests gets the `InfrastructureError`. While a
        call waits, its member is listed in ``waiting``; a call cancelled from outside (a task's timeout)
        leaves it listed, so whoever cut it can ask whether that member still answers.
        """
        groups: dict[int, list[int]] = {}
        for position, index in enumerate(indices):
            groups.setdefault(index % len(self.members), []).append(position)
        outcomes: list[Outcome] = [RuntimeError("not sent")] * len(requests)

        async def send(start: int, positions: list[int]) -> None:
            batch = [requests[p] for p in positions]
            try:
                got: list[Outcome] = await self._route(start, waiting, lambda member: member.serve_many(batch))
            except Exception as exc:
                got = [exc] * len(positions)
            for position, outcome in zip(positions, got, strict=True):
                outcomes[position] = outcome

        await asyncio.gather(*(send(start, positions) for start, positions in groups.items()))
        return outcomes

    async def _route(
        self, index: int, waiting: list[Member] | None, send: Callable[[Member], Awaitable[list[Outcome]]]
    ) -> list[Outcome]:
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
                outcomes = await asyncio.wait_for(send(member), self.deadline_s)
                waiting.remove(member)
                return outcomes
            except asyncio.CancelledError:
                raise
            except TimeoutError:
                waiting.remove(member)
                failures.append(CallTimeoutError(f"{self.role} call passed its {self.deadline_s:g} s deadline"))
            except Exception as exc:
                waiting.remove(member)
                if not member_failure(exc):
                    raise
                failures.append(exc)
        raise _every_member_failed(self.role, failures)


def _every_member_failed(role: RoleName, failures: list[BaseException]) -> InfrastructureError:
    if not failures:
        return InfrastructureError(f"no live {role} member", cause="NoMemberError", role=role)
    failure = machinery_failure(failures[-1], role=role)
    assert failure is not None
    return InfrastructureError(
        f"every {role} member failed ({len(failures)} tried): {failure}",
        cause=failure.cause,
        fault=failure.fault,
        role=role,
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

    def by_name(self) -> dict[RoleName, RolePool]:
        """Each pool by its role's name."""
        return {pool.role: pool for pool in self.pools()}

    @classmethod
    def of(
        cls,
        members: dict[RoleName, Sequence[Member | None]],
        *,
        deadline_s: float | None = ROLE_CALL_DEADLINE_S,
        paced: frozenset[RoleName] = frozenset(),
    ) -> Roles:
        """The pools of ``members``, by role name; a ``paced`` role's calls have no deadline."""
        return cls(
            **{
                name: RolePool(ms, role=name, deadline_s=None if name in paced else deadline_s)
                for name, ms in members.items()
            }
        )
