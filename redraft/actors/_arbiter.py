"""The arbiter as a Ray actor: task frames in, the task's trace streamed back as frames, a checkpoint a round.

The driver calls `ArbiterActor.stream`, a streaming generator: a chunk after each
finished round of the task (its frames and which reply answers which request),
then the rest with the `Result` last. If the arbiter or its node dies, the driver
keeps the finished rounds and hands them to the task's next attempt as its
``replay``, so no finished round is paid for twice, whichever node redoes it.

The engine's `Arbiter` does the work; this class only crosses the boundary: it
decodes the task and the replay, encodes each checkpoint's messages, wraps the
fleet's members (`redraft.actors._members.as_member`), and records the loop's model
calls as Ray metrics (all of a task's calls before its result leaves).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from redraft.actors._members import as_member, decode_reply, decode_request
from redraft.actors._metrics import ModelMetrics
from redraft.actors._ray import set_up_actor_process
from redraft.engine.arbiter import Arbiter, ArbiterSettings
from redraft.engine.pools import Roles
from redraft.protocols.messages import RoleName, StopLimit, Task, decode_as, encode
from redraft.scenarios import Scenario, provide

Chunk = tuple[list[bytes], list[tuple[int, int]], bool]
"""What `ArbiterActor.stream` yields: new frames, (request, reply) index pairs among the task's frames, and
whether this is the last chunk (its last frame the `Result`)."""


class ArbiterActor:
    """One arbiter per node runs many tasks' loops at once on its event loop."""

    def __init__(
        self, members: dict[RoleName, list[Any]], settings: ArbiterSettings, provided: tuple[Scenario, ...] = ()
    ) -> None:
        set_up_actor_process()
        for made in provided:  # scenarios the driver made from objects (a check given as a function)
            provide(made)
        self.metrics = ModelMetrics(settings.run)
        roles = Roles.of(
            {name: [as_member(m) for m in ms] for name, ms in members.items()},
            deadline_s=settings.call_deadline_s,
            paced=settings.paced_roles,
        )
        self.arbiter = Arbiter(roles, settings, on_call=self.metrics.call)

    async def stream(
        self,
        payload: bytes,
        timeout_s: float | None = None,
        limit: StopLimit = "task_timeout",
        replay: list[tuple[bytes, bytes]] | None = None,
    ) -> AsyncIterator[Chunk]:
        """Refine one task (a `Task` frame); its trace as chunks of frames (see the module docstring).
        ``replay`` answers, by their frames, the requests an earlier attempt of the task already had answered."""
        task = decode_as(payload, Task)
        answered = [(decode_request(q), decode_reply(a)) for q, a in replay or []]
        async for checkpoint in self.arbiter.refine(task, timeout_s, limit, answered):
            frames = [payload] if checkpoint.messages and checkpoint.messages[0] is task else []
            frames += [encode(m) for m in checkpoint.messages[len(frames) :]]
            if checkpoint.last:
                self.metrics.flush()  # the task's calls are recorded before its result is
            yield frames, checkpoint.pairs, checkpoint.last

    def replace_member(self, role: RoleName, index: int, member: Any) -> None:
        """The driver replaced a role member that died for good (None: the slot stays empty)."""
        self.arbiter.replace_member(role, index, as_member(member))
