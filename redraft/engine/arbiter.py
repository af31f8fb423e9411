"""The arbiter: owns each task's loop, ranks candidates, applies the convergence protocol.

One arbiter runs many task loops at once (each `Arbiter.refine` is one task, a
`redraft.engine._task_loop.TaskLoop`, on the caller's event loop). It hands back
every message of the task's trace with the `Result` last, so a task that failed
still has both, as `Checkpoint`s: one after each finished round (its messages and
which reply answers which request), then the rest with the `Result`; a strategy
whose round holds work worth keeping (a plan's verified step) asks for one mid-round
(`RoundContext.progress`). Whoever runs the arbiter may keep the checkpoints and
hand their replies to the task's next attempt as its ``replay`` (the actor system
does, when a node dies under a task), so no finished round or verified step is
paid for twice.

A task's timeout ends it with ``budget`` and its best so far, unless it was
waiting on a role member that no longer answers (frozen or dead): then the
machinery ran its time out, and the arbiter hands the task back as an
`InfrastructureError`, to be redone.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import msgspec

from redraft.engine._rules import ArbiterSettings, CallHook, Rules
from redraft.engine._task_loop import Replay, TaskLoop
from redraft.engine.pools import Member, Roles
from redraft.errors import InfrastructureError
from redraft.protocols.messages import Message, RoleName, StopLimit, Task
from redraft.protocols.stages import Stage
from redraft.scenarios import get_scenario
from redraft.strategies import get_strategy

__all__ = ["Arbiter", "ArbiterSettings", "CallHook", "Checkpoint"]

_LIMIT_NAMES: dict[StopLimit, str] = {"task_timeout": "task timeout", "run_deadline": "run time budget"}


@dataclass(frozen=True)
class Checkpoint:
    """What `Arbiter.refine` hands back after a round: the task's new messages, the (request, reply) index
    pairs among its messages (counted from the task's first), and whether this is the last (its last message
    the `Result`)."""

    messages: list[Message]
    pairs: list[tuple[int, int]]
    last: bool


class Arbiter:
    def __init__(
        self,
        roles: Roles,
        settings: ArbiterSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_call: CallHook = lambda _role, _model, _usage: None,
    ) -> None:
        strategy = get_strategy(settings.strategy)  # the name resolved once, here: an arbiter actor is sent names
        # The settings as this strategy plays them, one value each: one round for a strategy that does not
        # revise, the protocol's heuristics off for one that stops itself, one sample for a single-sample
        # one, a batch of its own for an arbiter given none.
        convergence = settings.convergence
        if not strategy.revises:
            convergence = msgspec.structs.replace(convergence, max_rounds=1)
        if strategy.stops_itself:
            convergence = msgspec.structs.replace(convergence, heuristics=False)
        settings = msgspec.structs.replace(
            settings,
            convergence=convergence,
            samples=1 if strategy.single_sample else settings.samples,
            batch=settings.batch or f"local-{uuid.uuid4().hex[:12]}",
        )
        self._stages: dict[str, list[Stage]] = {}
        self.rules = Rules(
            settings=settings, strategy=strategy, roles=roles, clock=clock, on_call=on_call, stages=self.stages
        )

    async def run(self, task: Task, timeout_s: float | None = None, limit: StopLimit = "task_timeout") -> list[Message]:
        """Refine one task; every message of its trace, `Result` last.

        After ``timeout_s`` the task stops mid-round with reason ``budget`` (time is one
        of a task's budgets) and the best candidate of its finished rounds; ``limit``
        names which time limit that is (the task's own, or the run's deadline).
        """
        trace: list[Message] = []
        async for checkpoint in self.refine(task, timeout_s, limit):
            trace += checkpoint.messages
        return trace

    async def refine(
        self, task: Task, timeout_s: float | None = None, limit: StopLimit = "task_timeout", replay: Replay = ()
    ) -> AsyncIterator[Checkpoint]:
        """`run`, a checkpoint per finished round (see the module docstring); ``replay`` answers the requests an
        earlier attempt of the task already had answered."""
        loop = TaskLoop(self.rules, task, replay)
        deadline = None if timeout_s is None else asyncio.get_running_loop().time() + timeout_s
        going = True
        while going:
            playing = asyncio.ensure_future(_play(loop, deadline, timeout_s, limit))
            try:
                while not playing.done():  # a round that calls `progress` is checkpointed mid-way, too
                    woke = asyncio.ensure_future(loop.progressed.wait())
                    await asyncio.wait((playing, woke), return_when=asyncio.FIRST_COMPLETED)
                    woke.cancel()
                    if loop.progressed.is_set() and not playing.done():
                        loop.progressed.clear()
                        yield Checkpoint(*loop.checkpoint(), last=False)
            finally:
                playing.cancel()  # nothing if it is done; the task's loop if our consumer stopped reading
            going = playing.result()
            loop.progressed.clear()
            yield Checkpoint(*loop.checkpoint(), last=not going)

    def replace_member(self, role: RoleName, index: int, member: Member | None) -> None:
        """A role member that died for good was replaced (None: the slot stays empty)."""
        self.rules.roles.by_name()[role].replace(index, member)

    def stages(self, scenario: str) -> list[Stage]:
        """The stages of ``scenario`` (looked up once per scenario, on the first stepwise task)."""
        if scenario not in self._stages:
            self._stages[scenario] = get_scenario(scenario).stages()
        return self._stages[scenario]


async def _play(loop: TaskLoop, deadline: float | None, timeout_s: float | None, limit: StopLimit) -> bool:
    """The task's next round, cut at ``deadline`` (see `Arbiter.run`); False once the task has its result."""
    try:
        async with asyncio.timeout_at(deadline) as cut:
            return await loop.step()
    except TimeoutError:
        if not cut.expired():
            raise  # not ours: a TimeoutError from inside the loop
        await _not_stalled(loop)
        await loop.stop_early(limit, f"{_LIMIT_NAMES.get(limit, limit)} after {timeout_s:g} s")
        return False


STALL_PING_S = 5.0


async def _not_stalled(loop: TaskLoop) -> None:
    """Before a timeout ends a task as ``budget``: `InfrastructureError` if it was waiting on a member that no
    longer answers (frozen, dead): the machinery, not the task, ran its time out, so it is redone.

    A member that answers but whose call is slow (a slow model, a slow server) is the task's time, spent.
    """
    members = list({id(m): m for m in loop.waiting}.values())
    alive = await asyncio.gather(*(m.answers(STALL_PING_S) for m in members))
    if not all(alive):
        raise InfrastructureError(
            f"the task's time ran out waiting on {alive.count(False)} role member(s) that stopped answering",
            cause="CallTimeoutError",
            fault="hung",
        )
