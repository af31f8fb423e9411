"""A round's requests cross in one call per member; cheap checks are the arbiter's, cheap grades the driver's."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from redraft.actors.batches import Batching
from redraft.actors.factory import RoleSetup, ray_grader, ray_member, verifies_in_arbiter
from redraft.backends.scripted import ScriptedSpec
from redraft.engine.grader import Grader
from redraft.engine.pools import RolePool
from redraft.engine.verifier import Verifier
from redraft.errors import ModelError
from redraft.protocols.messages import (
    CandidateText,
    Draft,
    GradeRequest,
    Verification,
    VerifyRequest,
    decode_as,
    encode,
)
from redraft.scenarios import checks_cheaply, get_scenario


class Echo(Batching):
    """A role whose ``draft`` echoes its frame, or fails for the frame ``b"bad"``; counts the calls it gets."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.batches: list[list[bytes]] = []

    async def draft(self, payload: bytes) -> bytes:
        if payload == b"bad":
            raise ModelError("an empty draft")
        return self.name.encode() + b":" + payload

    async def batch(self, method: str, payloads: list[bytes]) -> list[bytes | BaseException]:
        self.batches.append(payloads)
        return await super().batch(method, payloads)


def test_requests_go_to_their_members_in_one_call_each_and_fail_alone() -> None:
    a, b = Echo("a"), Echo("b")
    pool = RolePool([a, b], role="drafter")
    replies = asyncio.run(pool.call_many("draft", [b"0", b"bad", b"2"], [5, 6, 7]))
    assert replies[0] == b"b:0" and replies[2] == b"b:2"  # 5 and 7 are member 1, in one call
    assert isinstance(replies[1], ModelError)  # only its own request failed
    assert b.batches == [[b"0", b"2"]] and a.batches == [[b"bad"]]


def test_a_batch_refuses_a_method_that_is_not_a_request_handler() -> None:
    with pytest.raises(ValueError, match="cannot be called in batches"):
        asyncio.run(Echo("a").batch("__init__", [b""]))


def test_an_exception_that_cannot_be_pickled_travels_as_one_that_names_it() -> None:
    class Local(Exception):  # a local class: pickle cannot find it by name
        pass

    class Raises(Batching):
        async def draft(self, payload: bytes) -> bytes:
            raise Local("lost")

    [reply] = asyncio.run(Raises().batch("draft", [b""]))
    assert isinstance(reply, RuntimeError) and "Local: lost" in str(reply)


@pytest.mark.parametrize(
    ("scenario", "cheap"),
    [("arithmetic", True), ("json_extract", True), ("constrained_writing", True), ("humaneval", False), ("sql", False)],
)
def test_scenarios_say_whether_their_checks_are_cheap(scenario: str, cheap: bool) -> None:
    assert checks_cheaply(get_scenario(scenario)) is cheap


def test_cheap_checks_are_run_by_the_arbiter_unless_a_verifier_model_is_asked() -> None:
    spec = ScriptedSpec(script=["Answer: 1"])
    arithmetic = RoleSetup(scenario="arithmetic", drafter=spec, critic=spec)
    assert verifies_in_arbiter(arithmetic, "adversarial")
    assert not verifies_in_arbiter(arithmetic, "cove")  # its questions go to the verifier's model
    assert not verifies_in_arbiter(RoleSetup(scenario="humaneval", drafter=spec, critic=spec), "adversarial")
    member = ray_member(arithmetic, "adversarial", "verifier", "no-such-node")  # no actor: Ray is not asked
    assert isinstance(member, Verifier)


def test_a_verifier_travels_as_its_arguments_and_checks_alike() -> None:
    task = next(get_scenario("arithmetic").tasks(seed=0))
    draft = Draft(task_id=task.task_id, round=0, sample=0, text="2 + 3 = 5\nAnswer: 5")
    request = encode(VerifyRequest(task=task, draft=draft))
    verifier = Verifier("arithmetic")
    travelled = pickle.loads(pickle.dumps(verifier))
    assert isinstance(travelled, Verifier) and travelled is not verifier
    replies = [asyncio.run(v.verify(request)) for v in (verifier, travelled)]
    assert replies[0] == replies[1]
    assert decode_as(replies[0], Verification).checks


@pytest.mark.parametrize("scenario", ["arithmetic", "json_extract", "constrained_writing"])
def test_a_cheap_grade_is_the_driver_s_own_and_equals_the_grader_actor_s(scenario: str) -> None:
    spec = ScriptedSpec(script=["x"])
    grader = ray_grader(RoleSetup(scenario=scenario, drafter=spec, critic=spec), "no-such-node")  # Ray not asked
    assert isinstance(grader, Grader)
    task = next(get_scenario(scenario).tasks(seed=0))
    texts = ["Answer: 5", '{"name": "x"}', "Answer: 5", "Some words here."]
    request = encode(
        GradeRequest(task=task, candidates=[CandidateText(round=0, sample=k, text=t) for k, t in enumerate(texts)])
    )
    assert grader.grade_here(request) == asyncio.run(grader.grade(request))
