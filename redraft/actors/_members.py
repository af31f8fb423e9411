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
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Sequence
from typing import Any

from redraft.actors._ray import answers, is_actor, set_up_actor_process
from redraft.engine.pools import LocalMember, Member, Outcome, Reply, Request, Role
from redraft.engine.setup import Constructor
from redraft.errors import ProtocolError, describe
from redraft.protocols.messages import RoleName, decode, encode
from redraft.scenarios import Scenario, provide


class RoleActor:
    """A role behind the actor boundary: request frames in, reply frames out."""

    def __init__(self, constructor: Constructor, provided: tuple[Scenario, ...] = ()) -> None:
        set_up_actor_process()  # before the role: its backend's shared objects are actors
        for made in provided:  # scenarios the driver made from objects (a check given as a function)
            provide(made)
        cls, args, kwargs = constructor
        self._role: Role = cls(*args, **kwargs)

    async def serve_many(self, frames: list[bytes]) -> list[bytes | BaseException]:
        """Each request frame served concurrently; per request its reply frame or the exception it raised."""
        outcomes = await asyncio.gather(*(self.serve(f) for f in frames), return_exceptions=True)
        return [o if isinstance(o, bytes) else _portable(o) for o in outcomes]

    async def serve(self, frame: bytes) -> bytes:
        """One request frame served: its reply frame."""
        return encode(await self._role.serve(decode_request(frame)))


class DrafterActor(RoleActor):
    """The drafter as a Ray actor (its own class, so the cluster's dashboard and logs name it)."""


class CriticActor(RoleActor):
    """A critic (or self-critic) as a Ray actor."""


class VerifierActor(RoleActor):
    """The verifier as a Ray actor."""


class GraderActor(RoleActor):
    """The grader as a Ray actor."""


class JudgeActor(RoleActor):
    """The judge (``--judge``) as a Ray actor: the run's grader, by a model and a rubric."""


ACTOR_CLASSES: dict[RoleName, type[RoleActor]] = {
    "drafter": DrafterActor,
    "critic": CriticActor,
    "self_critic": CriticActor,
    "verifier": VerifierActor,
    "grader": GraderActor,
    "judge": JudgeActor,
}


class RayMember:
    """A role actor as the arbiter's `redraft.engine.pools.Member`: requests encoded, replies decoded."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def serve_many(self, requests: Sequence[Request]) -> list[Outcome]:
        frames = [encode(r) for r in requests]
        outcomes: list[bytes | BaseException] = await self.handle.serve_many.remote(frames)
        return [decode_reply(o) if isinstance(o, bytes) else o for o in outcomes]

    async def answers(self, within_s: float) -> bool:
        return await answers(self.handle, within_s)


def as_member(target: Any) -> Member | None:
    """What the fleet holds for a role slot as the arbiter's member: an actor handle behind a `RayMember`, a
    role object of the arbiter's own process (the verifier of instant checks) behind a `LocalMember`."""
    if target is None:
        return None
    return RayMember(target) if is_actor(target) else LocalMember(target)


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
