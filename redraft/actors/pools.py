"""The members of each role an arbiter calls, and how a call reaches one of them.

A pool holds Ray actor handles on a cluster, or plain role objects in-process;
calls cross as encoded frames either way (`redraft.runtime.call`), so the arbiter's
code is the same in both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redraft.runtime import call


class RolePool:
    """The members of one role. Calls cross as bytes, to Ray actor handles or plain objects."""

    def __init__(self, members: Sequence[Any]) -> None:
        if not members:
            raise ValueError("a role pool needs at least one member")
        self.members = list(members)

    async def call(self, method: str, payload: bytes, index: int) -> bytes:
        """Call ``method`` of member ``index`` (modulo the pool's size) with one frame; its reply frame."""
        reply: bytes = await call(self.members[index % len(self.members)], method, payload)
        return reply


@dataclass(frozen=True)
class Roles:
    """The role pools an arbiter calls; a critic pool exists only if the strategy needs it."""

    drafter: RolePool
    verifier: RolePool
    critic: RolePool | None = None
    self_critic: RolePool | None = None

    def pools(self) -> list[RolePool]:
        return [p for p in (self.drafter, self.verifier, self.critic, self.self_critic) if p is not None]
