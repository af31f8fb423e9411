"""The actor boundary without Ray: a round's requests cross in one call per member, frames are decoded and
encoded there and nowhere else, and each request keeps its own fate."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import msgspec
import pytest

from redraft.actors._members import RayMember, RoleActor, RunRole, as_member, decode_reply, decode_request
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


def echo(name: str) -> RunRole:
    """A run's drafter that is an `Echo` named ``name``, under the key ``name``."""
    return RunRole(name, (Echo, (name,), {}))


def test_a_role_actor_takes_frames_and_answers_frames() -> None:
    actor = RoleActor()
    frames = [encode(request(0)), encode(request(1, "bad")), b"\xc1garbage"]
    frames = asyncio.run(actor.serve_many("a", frames, echo("a")))
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

    [reply] = asyncio.run(RoleActor().serve_many("r", [encode(request(0))], RunRole("r", (Raises, (), {}))))
    assert isinstance(reply, RuntimeError) and "Local: lost" in str(reply)
    pickle.dumps(reply)


class FakeHandle:
    """What a Ray actor handle of a `RoleActor` offers a `RayMember`: ``serve_many.remote`` (a run's key, frames,
    and the run's role when sent)."""

    def __init__(self, actor: RoleActor) -> None:
        self.sent: list[tuple[str, list[bytes], bool]] = []

        async def remote(key: str, frames: list[bytes], role: RunRole | None = None) -> Any:
            self.sent.append((key, frames, role is not None))
            return await actor.serve_many(key, frames, role)

        self.serve_many = type("Method", (), {"remote": staticmethod(remote)})()


def test_a_ray_member_encodes_requests_and_decodes_replies() -> None:
    handle = FakeHandle(RoleActor())
    member = RayMember(handle, echo("a"))
    replies = asyncio.run(member.serve_many([request(3), request(4, "bad")]))
    frames = [encode(request(3)), encode(request(4, "bad"))]
    assert handle.sent == [("a", frames, False), ("a", frames, True)]  # the actor did not know the run: sent again
    assert replies[0] == Draft(task_id="t", round=0, sample=3, text="a:3")
    assert isinstance(replies[1], ModelError)
    asyncio.run(member.serve_many([request(5)]))
    assert handle.sent[2:] == [("a", [encode(request(5))], False)]  # once known, the run's role is not sent again


def test_one_role_actor_serves_each_run_with_that_run_s_own_role() -> None:
    actor = FakeHandle(RoleActor())
    a, b = RayMember(actor, echo("a")), RayMember(actor, echo("b"))
    replies = [asyncio.run(m.serve_many([request(k)])) for k, m in enumerate([a, b, a, b])]
    assert [r.text for [r] in replies if isinstance(r, Draft)] == ["a:0", "b:1", "a:2", "b:3"]


def test_a_role_actor_keeps_the_runs_asked_last_and_makes_again_one_it_let_go() -> None:
    actor = RoleActor()
    actor.kept = 2
    for name in ("a", "b", "a", "c"):  # "b" is the run asked least recently when "c" comes
        asyncio.run(actor.serve_many(name, [], echo(name)))
    assert asyncio.run(actor.serve_many("a", [])) == [] and asyncio.run(actor.serve_many("b", [])) is None
    handle = FakeHandle(actor)
    [draft] = asyncio.run(RayMember(handle, echo("b")).serve_many([request(7)]))
    assert isinstance(draft, Draft) and draft.text == "b:7" and [s[2] for s in handle.sent] == [False, True]


def test_a_fleet_slot_is_a_run_s_member_and_an_empty_slot_none() -> None:
    assert as_member(None, echo("a")) is None
    member = as_member(FakeHandle(RoleActor()), echo("a"))
    assert isinstance(member, RayMember) and member.role == echo("a")
