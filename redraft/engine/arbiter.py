"""The arbiter role: owns each task's loop, ranks candidates, applies the convergence protocol.

One arbiter runs many task loops at once (each `run` call is one task, a
`redraft.engine.task_loop.TaskLoop`, on the actor's event loop). It returns every
frame of the task's trace with the `Result` last, so the driver can write a
task's trace and result together, and a task that failed still has both.

A task's timeout ends it with ``budget`` and its best so far, unless it was
waiting on a role member that no longer answers (frozen or dead): then the
machinery ran its time out, and the arbiter hands the task back to the driver
to redo instead (`InfrastructureError`).

On Ray the driver calls `stream` instead, a streaming generator: a checkpoint
after each finished round (its frames and which reply answers which request),
then the rest with the `Result`. If the arbiter or its node dies, the driver
keeps the finished rounds and hands them to the task's next attempt as its
``replay``, so no finished round is paid for twice, whichever node redoes it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec

from redraft.actors.metrics import ModelMetrics
from redraft.backends.pricing import PriceTable, default_prices
from redraft.engine.pools import Roles
from redraft.engine.task_loop import TaskLoop
from redraft.errors import InfrastructureError
from redraft.protocols.convergence import ConvergenceConfig
from redraft.protocols.messages import RevisionMode, StopLimit, Task, decode_as
from redraft.protocols.stages import Stage
from redraft.runtime import answers, die_with_raylet
from redraft.scenarios import get_scenario, stages_of
from redraft.strategies import Strategy, get_strategy

_LIMIT_NAMES: dict[StopLimit, str] = {"task_timeout": "task timeout", "run_deadline": "run time budget"}

Chunk = tuple[list[bytes], list[tuple[int, int]], bool]
"""What `Arbiter.stream` yields: new frames, (request, reply) index pairs among the task's frames, and
whether this is the last chunk (its last frame the `Result`)."""


class ArbiterSettings(msgspec.Struct, frozen=True, kw_only=True):
    strategy: str = "adversarial"
    samples: int = 3
    """K: candidates drafted in parallel per round (self-consistency)."""
    seed: int = 0
    repeat: int = 0
    """A repeat of the same tasks (``redraft compare --repeats``): salts every sampling seed."""
    convergence: ConvergenceConfig = ConvergenceConfig()
    memory: int = 3
    """How many earlier attempts a revision prompt recalls."""
    prices: PriceTable = msgspec.field(default_factory=default_prices)
    revision_mode: RevisionMode = "rewrite"
    """``patch``: revisions are minimal search/replace edits of the best so far (delta-based correction)."""
    run: str = ""
    """The run's id, tagging the arbiter's metrics (`redraft.actors.metrics`); '' records none."""


class Arbiter:
    def __init__(self, roles: Roles, settings: ArbiterSettings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.roles = roles
        self.settings = settings
        self.strategy: Strategy = get_strategy(settings.strategy)
        convergence = settings.convergence
        if not self.strategy.revises:
            convergence = msgspec.structs.replace(convergence, max_rounds=1)
        self.convergence = convergence
        self.samples = 1 if self.strategy.single_sample else settings.samples
        self.clock = clock
        """The arbiter's clock (monotonic seconds), injected so tests can pin time."""
        self._stages: dict[str, list[Stage]] = {}
        self.metrics = ModelMetrics(settings.run)
        die_with_raylet()

    async def run(
        self, payload: bytes, timeout_s: float | None = None, limit: StopLimit = "task_timeout"
    ) -> list[bytes]:
        """Refine one task (a `Task` frame); return every frame of its trace, `Result` last.

        After ``timeout_s`` the task stops mid-round with reason ``budget`` (time is one
        of a task's budgets) and the best candidate of its finished rounds; ``limit``
        names which time limit that is (the task's own, or the run's deadline).
        """
        frames: list[bytes] = []
        async for chunk, _pairs, _last in self.stream(payload, timeout_s, limit):
            frames += chunk
        return frames

    async def stream(
        self,
        payload: bytes,
        timeout_s: float | None = None,
        limit: StopLimit = "task_timeout",
        replay: list[tuple[bytes, bytes]] | None = None,
    ) -> AsyncIterator[Chunk]:
        """`run`, a checkpoint per finished round (see the module docstring); ``replay`` answers the
        requests an earlier attempt of the task already had answered."""
        task = decode_as(payload, Task)
        loop = TaskLoop(self, task, dict(replay or []))
        loop.frames.append(payload)
        deadline = None if timeout_s is None else asyncio.get_running_loop().time() + timeout_s
        going = True
        while going:
            try:
                async with asyncio.timeout_at(deadline) as cut:
                    going = await loop.step()
            except TimeoutError:
                if not cut.expired():
                    raise  # not ours: a TimeoutError from inside the loop
                await _not_stalled(loop)
                loop.stop_early(limit, f"{_LIMIT_NAMES.get(limit, limit)} after {timeout_s:g} s")
                going = False
            frames, pairs = loop.checkpoint()
            if not going:
                self.metrics.flush()  # the task's calls are recorded before its result is
            yield frames, pairs, not going

    def replace_member(self, role: str, index: int, member: Any) -> None:
        """The driver replaced a role member that died for good (None: the slot stays empty)."""
        self.roles.by_name()[role].replace(index, member)

    def stages(self, scenario: str) -> list[Stage]:
        """The stages of ``scenario`` (looked up once per scenario, on the first stepwise task)."""
        if scenario not in self._stages:
            self._stages[scenario] = stages_of(get_scenario(scenario))
        return self._stages[scenario]


STALL_PING_S = 5.0


async def _not_stalled(loop: TaskLoop) -> None:
    """Before a timeout ends a task as ``budget``: `InfrastructureError` if it was waiting on a member that no
    longer answers (frozen, dead): the machinery, not the task, ran its time out, so the driver redoes it.

    A member that answers but whose call is slow (a slow model, a slow server) is the task's time, spent.
    """
    members = list({id(m): m for m in loop.waiting}.values())
    alive = await asyncio.gather(*(answers(m, STALL_PING_S) for m in members))
    if not all(alive):
        raise InfrastructureError(
            f"the task's time ran out waiting on {alive.count(False)} role member(s) that stopped answering",
            cause="CallTimeoutError",
        )
