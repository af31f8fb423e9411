"""The actor boundary without Ray: a round's requests cross in one call per member, frames are decoded and
encoded there and nowhere else, and each request keeps its own fate."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import msgspec
import pytest

from redraft.actors._members import RayMember, RoleActor, as_member, decode_reply, decode_request
from redraft.engine.pools import LocalMember, Reply, Request, RolePool
from redraft.errors import ModelError, ProtocolError
from redraft.protocols.messages import Draft, DraftRequest, Task, decode, encode

TASK = Task(task_id="t", scenario="arithmetic", prompt="1 + 1?")


def request(sample: int, prompt: str = "1 + 1?") -> DraftRequest:
    return DraftRequest(task=msgspec.structs.replace(TASK, prompt=prompt), round=0, sample=sample, seed=sample)


class Echo:
    """A drafter whose draft names it and the request's sample; the prompt ``bad`` fails its request alone."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.batches: list[list[int]] = []

    async def serve(self, request: Request) -> Reply:
        assert isinstance(request, DraftRequest)
        if request.task.prompt == "bad":
            raise ModelError("an empty draft")
        return Draft(task_id="t", round=0, sample=request.sample, text=f"{self.name}:{request.sample}")


class Counted(LocalMember):
    async def serve_many(self, requests: Any) -> Any:
        assert isinstance(self.role, Echo)
        self.role.batches.append([r.sample for r in requests])
        return await super().serve_many(requests)


def test_requests_go_to_their_members_in_one_call_each_and_fail_alone() -> None:
    a, b = Echo("a"), Echo("b")
    pool = RolePool([Counted(a), Counted(b)], role="drafter")
    replies = asyncio.run(pool.call_many([request(0), request(1, "bad"), request(2)], [5, 6, 7]))
    assert [r.text for r in replies if isinstance(r, Draft)] == ["b:0", "b:2"]  # 5 and 7: member 1, one call
    assert isinstance(replies[1], ModelError)  # only its own request failed
    assert b.batches == [[0, 2]] and a.batches == [[1]]


def test_a_role_actor_takes_frames_and_answers_frames() -> None:
    actor = RoleActor((Echo, ("a",), {}))
    frames = asyncio.run(actor.serve_many([encode(request(0)), encode(request(1, "bad")), b"\xc1garbage"]))
    assert isinstance(frames[0], bytes) and decode(frames[0]) == Draft(task_id="t", round=0, sample=0, text="a:0")
    assert isinstance(frames[1], ModelError)
    assert isinstance(frames[2], ProtocolError)  # a corrupt frame fails its own request, not the batch


def test_a_frame_that_is_not_a_request_or_a_reply_is_refused_by_name() -> None:
    with pytest.raises(ProtocolError, match="expected a request, got a `Task`"):
        decode_request(encode(TASK))
    with pytest.raises(ProtocolError, match="expected a reply, got a `DraftRequest`"):
        decode_reply(encode(request(0)))


def test_an_exception_that_cannot_be_pickled_travels_as_one_that_names_it() -> None:
    class Local(Exception):  # a local class: pickle cannot find it by name
        pass

    class Raises:
        async def serve(self, request: Request) -> Reply:
            raise Local("lost")

    [reply] = asyncio.run(RoleActor((Raises, (), {})).serve_many([encode(request(0))]))
    assert isinstance(reply, RuntimeError) and "Local: lost" in str(reply)
    pickle.dumps(reply)


class FakeHandle:
    """What a Ray actor handle of a `RoleActor` offers a `RayMember`: ``serve_many.remote`` (frames)."""

    def __init__(self, actor: RoleActor) -> None:
        self.sent: list[list[bytes]] = []

        async def remote(frames: list[bytes]) -> list[bytes | BaseException]:
            self.sent.append(frames)
            return await actor.serve_many(frames)

        self.serve_many = type("Method", (), {"remote": staticmethod(remote)})()


def test_a_ray_member_encodes_requests_and_decodes_replies() -> None:
    handle = FakeHandle(RoleActor((Echo, ("a",), {})))
    replies = asyncio.run(RayMember(handle).serve_many([request(3), request(4, "bad")]))
    assert handle.sent == [[encode(request(3)), encode(request(4, "bad"))]]  # frames crossed, once
    assert replies[0] == Draft(task_id="t", round=0, sample=3, text="a:3")
    assert isinstance(replies[1], ModelError)


def test_a_plain_role_object_is_an_arbiters_own_member() -> None:
    assert as_member(None) is None
    member = as_member(Echo("here"))
    assert isinstance(member, LocalMember) and asyncio.run(member.answers(0.1))
