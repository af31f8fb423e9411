"""The roles as Ray actors, and the arbiter's side of a call to one: the actor boundary, where frames are made.

A role (`redraft.engine.pools.Role`) takes typed requests and returns typed replies.
As a Ray actor (`RoleActor`) it takes the MessagePack frames of its requests and
returns the frames of its replies: each request is decoded (validated) as it
arrives and each reply encoded as it leaves, here and nowhere else. The arbiter
reaches it through a `RayMember`, which encodes the requests and decodes the
replies, so the arbiter's loop sees typed messages on a cluster as in one process.

The K requests of a round bound for one member cross in one call
(`RoleActor.serve_many`): a hop between processes costs far more than the work of
routing a frame. Each request keeps its own fate: one reply or one exception per
request, in order. An exception travels back inside the reply list, so one that
cannot be pickled travels as a `RuntimeError` naming it rather than failing the
whole batch.

See docs/architecture.md, section "A role actor serves every run of its fleet".
"""

from __future__ import annotations

import asyncio
import pickle
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redraft.actors._ray import answers, set_up_actor_process
from redraft.engine.pools import Member, Outcome, Reply, Request, Role
from redraft.engine.resolution import Constructor
from redraft.errors import ProtocolError, describe
from redraft.protocols.messages import RoleName, decode, encode
from redraft.scenarios import Scenario, provide


@dataclass(frozen=True)
class RunRole:
    """One role as one run plays it: how the role object is made, and the key the actors keep it under."""

    key: str
    """Unique to the run and the role (`redraft.actors._fleet.Lease` makes it)."""
    constructor: Constructor
    provided: tuple[Scenario, ...] = ()
    """Scenarios the driver made from objects (a check given as a function), provided before the role is made."""

    def make(self) -> Role:
        for made in self.provided:
            provide(made)
        cls, args, kwargs = self.constructor
        role: Role = cls(*args, **kwargs)
        return role


class RoleActor:
    """A role behind the actor boundary, for every run that asks: request frames in, reply frames out."""

    kept = 256
    """Role objects kept at once, of the runs asked most recently; one let go is made again when asked. A role is
    kept after its run ends, until the actor does (or more runs than this came since): its model clients have no
    close of their own, and one dropped is left to the garbage collector, which aiohttp warns of."""

    def __init__(self) -> None:
        set_up_actor_process()  # before any role: their backends' shared objects are actors
        self._roles: OrderedDict[str, Role] = OrderedDict()

    async def serve_many(
        self, key: str, frames: list[bytes], role: RunRole | None = None
    ) -> list[bytes | BaseException] | None:
        """Each request frame served concurrently by run ``key``'s role; per request its reply frame or the
        exception it raised. None when the actor does not know ``key`` and ``role`` was not sent: send it."""
        made = self._role(key, role)
        if made is None:
            return None
        outcomes = await asyncio.gather(*(_serve(made, f) for f in frames), return_exceptions=True)
        return [o if isinstance(o, bytes) else _portable(o) for o in outcomes]

    async def serve(self, key: str, frame: bytes, role: RunRole | None = None) -> bytes | None:
        """One request frame served by run ``key``'s role: its reply frame (None: as `serve_many`)."""
        made = self._role(key, role)
        return None if made is None else await _serve(made, frame)

    def _role(self, key: str, role: RunRole | None) -> Role | None:
        made = self._roles.get(key)
        if made is None:
            if role is None:
                return None
            made = self._roles[key] = role.make()
            while len(self._roles) > self.kept:
                self._roles.popitem(last=False)
        self._roles.move_to_end(key)
        return made


async def _serve(role: Role, frame: bytes) -> bytes:
    return encode(await role.serve(decode_request(frame)))


class DrafterActor(RoleActor):
    """The drafter as a Ray actor (its own class, so the cluster's dashboard and logs name it)."""


class CriticActor(RoleActor):
    """A critic (or self-critic) as a Ray actor."""


class VerifierActor(RoleActor):
    """The verifier as a Ray actor."""


class GraderActor(RoleActor):
    """The grader as a Ray actor."""


ACTOR_CLASSES: dict[RoleName, type[RoleActor]] = {
    "drafter": DrafterActor,
    "critic": CriticActor,
    "self_critic": CriticActor,
    "verifier": VerifierActor,
    "grader": GraderActor,
}


class RayMember:
    """A role actor as the arbiter's `redraft.engine.pools.Member` for one run: requests encoded, replies
    decoded, and the run's `RunRole` sent along when the actor does not know it yet."""

    def __init__(self, handle: Any, role: RunRole) -> None:
        self.handle = handle
        self.role = role

    async def serve_many(self, requests: Sequence[Request]) -> list[Outcome]:
        frames = [encode(r) for r in requests]
        outcomes: list[bytes | BaseException] | None = await self.handle.serve_many.remote(self.role.key, frames)
        if outcomes is None:
            outcomes = await self.handle.serve_many.remote(self.role.key, frames, self.role)
        assert outcomes is not None  # sent with its role, a call is always served
        return [decode_reply(o) if isinstance(o, bytes) else o for o in outcomes]

    async def answers(self, within_s: float) -> bool:
        return await answers(self.handle, within_s)


def as_member(target: Any, role: RunRole) -> Member | None:
    """What the fleet holds for a role slot as a run's member: an actor handle behind a `RayMember` for the
    run's ``role``; None for a slot whose replacement could not be placed."""
    return None if target is None else RayMember(target, role)


def decode_request(frame: bytes) -> Request:
    """A request frame, validated; `ProtocolError` if it is anything else."""
    message = decode(frame)
    if not isinstance(message, Request):
        raise ProtocolError(f"expected a request, got a `{type(message).__name__}` message")
    return message


def decode_reply(frame: bytes) -> Reply:
    """A reply frame, validated; `ProtocolError` if it is anything else."""
    message = decode(frame)
    if not isinstance(message, Reply):
        raise ProtocolError(f"expected a reply, got a `{type(message).__name__}` message")
    return message


def _portable(exc: BaseException) -> BaseException:
    """``exc``, or a `RuntimeError` naming it when it cannot be pickled (it has to cross back to the arbiter)."""
    try:
        pickle.dumps(exc)
    except Exception:
        return RuntimeError(describe(exc))
    return exc
