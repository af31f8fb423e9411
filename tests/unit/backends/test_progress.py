"""A call that is slow but alive is waited for; one whose server stopped making progress fails as the machinery's
failure (redone), never at a fixed deadline; and the roles of the embedded model have no role-call deadline."""

from __future__ import annotations

import asyncio

import pytest

from redraft.backends._progress import await_progressing
from redraft.backends.registry import resolve
from redraft.engine.pools import ROLE_CALL_DEADLINE_S, LocalMember, Roles
from redraft.engine.resolution import RoleSetup, paced_roles
from redraft.errors import BackendUnavailableError, machinery_failure


class Server:
    """A server whose progress counter grows while ``working``; its call ends when ``done`` is set."""

    def __init__(self, *, working: bool) -> None:
        self.steps = 0
        self.working = working
        self.done = asyncio.Event()
        self.asked = 0

    async def call(self) -> str:
        while not self.done.is_set():
            if self.working:
                self.steps += 1
            await asyncio.sleep(0.01)
        return "answer"

    async def progress(self) -> int:
        self.asked += 1
        if self.asked == 30:  # slow far beyond the stall limit, but alive: it finishes
            self.done.set()
        return self.steps


async def test_a_call_that_keeps_progressing_is_waited_for_past_any_stall_limit() -> None:
    server = Server(working=True)
    answer = await await_progressing(server.call(), server.progress, what="local", poll_s=0.02, stall_s=0.1)
    assert answer == "answer" and server.asked >= 30  # polled 30 times: far past 0.1 s, and never cut


async def test_a_call_whose_server_stopped_fails_as_the_machinery_s_failure() -> None:
    server = Server(working=False)
    with pytest.raises(BackendUnavailableError, match=r"local: the model made no progress for 0\.1 s") as caught:
        await await_progressing(server.call(), server.progress, what="local", poll_s=0.02, stall_s=0.1)
    failure = machinery_failure(caught.value)
    assert failure is not None and failure.fault == "unreachable"  # the task is redone, never recorded
    assert server.asked < 30  # it did not wait for the server's own end


async def test_a_progress_question_that_goes_unanswered_counts_as_no_progress() -> None:
    async def silent() -> int:
        await asyncio.sleep(60)
        return 0

    never = asyncio.Event()
    with pytest.raises(BackendUnavailableError):
        await await_progressing(never.wait(), silent, what="local", poll_s=0.02, stall_s=0.1)


def test_the_embedded_model_s_roles_have_no_role_call_deadline() -> None:
    local, remote = resolve("local"), resolve("scripted:tests.support.replies:exits_zero")
    assert paced_roles(RoleSetup("arithmetic", local, local)) == {"drafter", "critic", "self_critic"}
    assert paced_roles(RoleSetup("arithmetic", remote, local)) == {"critic"}
    assert paced_roles(RoleSetup("arithmetic", remote, remote)) == set()
    member = LocalMember(object())  # type: ignore[arg-type]
    roles = Roles.of({"drafter": [member], "verifier": [member]}, deadline_s=5.0, paced=frozenset({"drafter"}))
    assert roles.drafter.deadline_s is None and roles.verifier.deadline_s == 5.0
    assert Roles.of({"drafter": [member], "verifier": [member]}).drafter.deadline_s == ROLE_CALL_DEADLINE_S
