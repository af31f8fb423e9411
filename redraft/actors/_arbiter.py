"""The arbiter as a Ray actor: task frames in, the task's trace streamed back as frames, a checkpoint a round.

The driver calls `ArbiterActor.stream`, a streaming generator: a chunk after each
finished round of the task (its frames and which reply answers which request),
then the rest with the `Result` last. If the arbiter or its node dies, the driver
keeps the finished rounds and hands them to the task's next attempt as its
``replay``, so no finished round is paid for twice, whichever node redoes it.

One arbiter actor serves every run of its fleet (`redraft.actors._fleet`): each run is opened on it
(`ArbiterRun`: its settings, and each role as the run plays it) and closed when the run ends, and each task
names its run. Per run it keeps an engine `Arbiter` over the fleet's members, each wrapped for that run
(`redraft.actors._members.RayMember`), and the roles the arbiter runs itself (the verifier of instant
checks, `redraft.actors._placement`). The engine's `Arbiter` does the work; this class only crosses the
boundary: it decodes the task and the replay, encodes each checkpoint's messages, and records the loop's
model calls as Ray metrics (all of a task's calls before its result leaves).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from redraft.actors._members import RunRole, as_member, decode_reply, decode_request
from redraft.actors._metrics import ModelMetrics
from redraft.actors._ray import set_up_actor_process
from redraft.engine.arbiter import Arbiter, ArbiterSettings
from redraft.engine.pools import LocalMember, Member, Roles
from redraft.protocols.messages import RoleName, StopLimit, Task, decode_as, encode
from redraft.scenarios import provide

Chunk = tuple[list[bytes], list[tuple[int, int]], bool]
"""What `ArbiterActor.stream` yields: new frames, (request, reply) index pairs among the task's frames, and
whether this is the last chunk (its last frame the `Result`)."""

Crew = dict[RoleName, list[Any]]
"""The fleet's role members by slot: an actor handle, or None (a slot whose replacement could not be placed)."""


@dataclass(frozen=True)
class ArbiterRun:
    """One run as the arbiters play it (plain data: it travels to each arbiter once, when the run opens)."""

    key: str
    settings: ArbiterSettings
    roles: dict[RoleName, RunRole]
    """The roles the fleet's actors serve, each as this run plays it."""
    local: dict[RoleName, RunRole]
    """The roles the arbiter runs itself (the verifier of instant checks)."""


class ArbiterActor:
    """One arbiter per node runs many tasks' loops at once, of every run open on it, on its event loop."""

    def __init__(self, crew: Crew, runs: Sequence[ArbiterRun] = ()) -> None:
        set_up_actor_process()
        self.crew: Crew = {name: list(ms) for name, ms in crew.items()}
        self.runs: dict[str, tuple[ArbiterRun, Arbiter, ModelMetrics]] = {}
        for run in runs:
            self.open(run)

    def open(self, run: ArbiterRun, crew: Crew | None = None) -> None:
        """Serve ``run`` from now on, with the fleet's ``crew`` as it now stands (roles it grew for the run)."""
        self.crew.update({name: list(ms) for name, ms in (crew or {}).items()})
        for role in run.roles.values():  # scenarios the driver made from objects, before any is looked up
            for made in role.provided:
                provide(made)
        members: dict[RoleName, Sequence[Member | None]] = {
            name: [as_member(m, role) for m in self.crew[name]] for name, role in run.roles.items()
        }
        members.update({name: [LocalMember(role.make())] for name, role in run.local.items()})
        settings = run.settings
        roles = Roles.of(members, deadline_s=settings.call_deadline_s, paced=settings.paced_roles)
        metrics = ModelMetrics(settings.run)
        self.runs[run.key] = (run, Arbiter(roles, settings, on_call=metrics.call), metrics)

    def close(self, key: str) -> None:
        """``key``'s run has ended: let its arbiter go (its tasks are all back)."""
        self.runs.pop(key, None)

    async def stream(
        self,
        payload: bytes,
        timeout_s: float | None = None,
        limit: StopLimit = "task_timeout",
        replay: list[tuple[bytes, bytes]] | None = None,
        run: str = "",
    ) -> AsyncIterator[Chunk]:
        """Refine one task (a `Task` frame) of the open run ``run``; its trace as chunks of frames (see the module
        docstring). ``replay`` answers, by their frames, the requests an earlier attempt of the task already had
        answered."""
        _, arbiter, metrics = self.runs[run]
        task = decode_as(payload, Task)
        answered = [(decode_request(q), decode_reply(a)) for q, a in replay or []]
        async for checkpoint in arbiter.refine(task, timeout_s, limit, answered):
            frames = [payload] if checkpoint.messages and checkpoint.messages[0] is task else []
            frames += [encode(m) for m in checkpoint.messages[len(frames) :]]
            if checkpoint.last:
                metrics.flush()  # the task's calls are recorded before its result is
            yield frames, checkpoint.pairs, checkpoint.last

    def replace_member(self, role: RoleName, index: int, member: Any) -> None:
        """The driver replaced a role member that died for good (None: the slot stays empty)."""
        if role in self.crew:
            self.crew[role][index] = member
        for run, arbiter, _ in self.runs.values():
            if role in run.roles:
                arbiter.replace_member(role, index, as_member(member, run.roles[role]))
