"""The runs' actors, kept whole: role members and graders per node, arbiters, and a heartbeat over them all.

A `Fleet` serves one run or many (every evaluation of a tune, every lane of a comparison: see
`redraft.actors._leases`): its actors take each run's prompts and settings with its calls, so what a fleet is made
for is only what its actors reserve (`Fleet.fits`). It starts `Fleet.arbiters_per_node` arbiters per live node with
its first run (tasks go to each in turn: an arbiter's death redoes the rounds in flight of a share of its node's
tasks, the others go on), and one member of each role a run needs, the grader included, per node when a run first
needs that role; a run is opened on every arbiter (`open`) and closed when it ends. Then it keeps them so: it
starts them all at once, pings each on a heartbeat and kills one that hangs, rebuilds or replaces one that died for
good, runs a suspect task alone, and counts the disturbances a task's timeout may owe to the machinery.

Once started, nothing here blocks: `check` looks at the pings that came back (``ray.wait`` with no timeout) and is
called from each run's dispatch loop; a lock keeps the runs sharing a fleet from handling one death twice.

See docs/architecture.md, section "A fleet kept whole".
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from redraft.actors import _factory as factory
from redraft.actors._arbiter import ArbiterRun, Crew
from redraft.actors._ray import actor_state, alive_nodes
from redraft.errors import BackendError, ClusterError, cause_of, describe
from redraft.protocols.messages import RoleName

log = logging.getLogger(__name__)


Kind = RoleName | Literal["arbiter"]


def machine_load() -> tuple[float, int]:
    """This machine's load average over the last minute, and its CPUs."""
    return os.getloadavg()[0], os.cpu_count() or 1


def patience(base_s: float, load: float, cpus: int) -> float:
    """``base_s`` stretched by how busy the machine is: at a load of 20 on 2 cores a process gets a tenth of
    the CPU it would alone, and its event loop answers a ping ten times later without being frozen."""
    return base_s * max(1.0, load / max(cpus, 1))


@dataclass
class _Ping:
    kind: Kind
    """A role's name (``grader`` included) or ``arbiter``."""
    index: int
    handle: Any
    sent: float
    placing: bool = False
    """A replacement's first ping: it may take `Fleet.place_timeout_s` (a fresh actor starts its process)."""
    restarts: int = -1
    """The actor's restart count when first found overdue (-1: not yet looked up)."""


class Fleet:
    """See the module docstring, and docs/architecture.md, section "A fleet kept whole"."""

    heartbeat_s = 2.0
    hung_after_s = 15.0
    place_timeout_s = 60.0
    place_tries = 3
    """Replacements of one member slot that may die before they first answer, in a row, before it is given up."""
    start_timeout_s = 300.0
    start_deaths = 3
    """Deaths of one actor slot while the fleet starts (each restarted, rebuilt or replaced), with no actor answering
    in between, before the run stops."""
    arbiters_per_node = 2
    """Arbiter actors on each node: no one of them is a single point of failure for the node's tasks."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        """Held by whatever changes the fleet: a run opening or closing, a heartbeat, a replacement."""
        self._nodes = alive_nodes()
        """The node each slot (an arbiter's, each role's member) was placed on (a replacement goes there while it
        lives)."""
        self.members: Crew = {}
        """Each role's members by slot (the graders' under ``grader``), grown as runs need roles."""
        self.cpus: dict[RoleName, float] = {}
        """What each role's actors reserve."""
        self.arbiters: list[Any] = []
        self.runs: dict[str, ArbiterRun] = {}
        """The runs open on the arbiters, by key: a new arbiter (a replacement, a quarantine) gets them."""
        self._quarantined: dict[Any, str] = {}
        """Each quarantine arbiter, with the run it serves."""
        self._pings: dict[Any, _Ping] = {}
        self._answered: dict[int, Any] = {}
        """The actors that answered once, by ``id`` (the handle kept, so its ``id`` is not reused)."""
        self._last_beat = clock()
        self.replaced = 0
        """Actors rebuilt or killed by the fleet (deaths and hangs it handled)."""
        self.disturbances = 0
        """Role members killed, dead, replaced or restarted so far (docs/architecture.md, "A fleet kept whole")."""
        self._restarts: dict[int, int] = {}
        """Each member actor's restart count at the last heartbeat, by ``id`` of its handle."""
        self._placing_deaths: Counter[tuple[Kind, int]] = Counter()
        """Replacements of each member slot that died before they first answered, since one last did."""

    @property
    def nodes(self) -> int:  # the nodes the fleet was placed on
        return len(self._nodes)

    def fits(self, roles: dict[RoleName, float]) -> bool:
        """Whether runs needing ``roles`` (each with the CPUs its actors reserve) can be served here."""
        return all(self.cpus.get(role, cpus) == cpus for role, cpus in roles.items())

    def grow(self, roles: dict[RoleName, float]) -> None:
        """Start the arbiters (with the first run) and the members of ``roles`` the fleet lacks, and return once
        every one answered (docs/architecture.md, "A fleet kept whole"); kill what started if that fails."""
        with self.lock:
            for role, cpus in roles.items():
                if role not in self.members:
                    self.cpus[role] = cpus
                    self.members[role] = [factory.member(role, node, cpus) for node in self._nodes]
            if not self.arbiters:
                per_node = range(self.arbiters_per_node)
                self.arbiters = [factory.arbiter({}, [], node) for _ in per_node for node in self._nodes]
            try:
                self._await_started()
            except BaseException:
                self.shutdown()
                raise

    def open(self, run: ArbiterRun) -> list[Any]:
        """Open ``run`` on every arbiter, with the members it calls; the calls to await."""
        with self.lock:
            self.runs[run.key] = run
            crew = {role: self.members[role] for role in run.roles}
            return [a.open.remote(run, crew) for a in self.arbiters]

    def close(self, key: str) -> None:
        """``key``'s run has ended: closed on every arbiter, its quarantine arbiters killed."""
        with self.lock:
            self.runs.pop(key, None)
            for arbiter in self.arbiters:
                arbiter.close.remote(key)
            for handle in [h for h, run in self._quarantined.items() if run == key]:
                self.release(handle)

    # ------------------------------------------------------------ start

    def _await_started(self) -> None:
        import ray

        deadline = self.clock() + self.start_timeout_s
        answered = self._answered
        deaths: Counter[tuple[Kind, int]] = Counter()
        while self._ping_unanswered(answered):
            left = deadline - self.clock()
            ready = ray.wait(list(self._pings), num_returns=1, timeout=left, fetch_local=False)[0] if left > 0 else []
            if not ready:
                limit = f"{self.start_timeout_s:g} s"
                raise BackendError(f"role actors did not start within {limit} (not enough resources?)")
            for ref in ready:
                ping = self._pings.pop(ref)
                try:
                    ray.get(ref)
                except Exception as exc:
                    self._died_starting(ping, exc, deaths)
                else:
                    answered[id(ping.handle)] = ping.handle
                    deaths.clear()  # the start moves on: deaths so far were a storm's, not a slot's own
                    self._placing_deaths.pop((ping.kind, ping.index), None)

    def _ping_unanswered(self, answered: dict[int, Any]) -> bool:
        """Ping each actor that has not answered yet and has no ping out; whether any of them has one out."""
        out = {id(p.handle) for p in self._pings.values()}
        now = self.clock()
        for kind, index, handle in self._actors():
            if handle is not None and id(handle) not in answered and id(handle) not in out:
                self._pings[handle.__ray_ready__.remote()] = _Ping(kind, index, handle, now)
        return any(id(p.handle) not in answered for p in self._pings.values())

    def _died_starting(self, ping: _Ping, exc: BaseException, deaths: Counter[tuple[Kind, int]]) -> None:
        """An actor's first ping failed: its constructor's error stops the run; a death is handled as during the
        run (`_died`), up to `start_deaths` for its slot."""
        import ray.exceptions as rex

        cause = cause_of(exc)
        if isinstance(cause, rex.RayActorError) and cause.actor_init_failed:
            raise BackendError(f"a role actor failed to start: {describe(exc)}") from None
        deaths[ping.kind, ping.index] += 1
        if deaths[ping.kind, ping.index] > self.start_deaths:
            raise ClusterError(
                f"the {ping.kind} actor {ping.index} died {deaths[ping.kind, ping.index]} times while the run started "
                f"(last: {describe(exc)}); nothing ran: rerun with the same --out once the cluster is steady"
            )
        self._died(ping, exc)

    # ------------------------------------------------------------ arbiters

    def arbiter_lost(self, slot: int | None, handle: Any) -> None:
        """The arbiter ``handle`` in ``slot`` died (a task of it says so): replace it, once per death (a
        quarantine arbiter, in no slot, is not replaced)."""
        with self.lock:
            if slot is not None and self.arbiters[slot] is handle:
                node = self._live_node(self._nodes[slot % len(self._nodes)])  # slot i is on node i mod n
                self.arbiters[slot] = new = factory.arbiter(self.members, list(self.runs.values()), node)
                self._pings[new.__ray_ready__.remote()] = _Ping("arbiter", slot, new, self.clock(), placing=True)
                self.replaced += 1

    def serving(self) -> list[int]:
        """The arbiter slots whose actor has answered (a replacement starting takes seconds: tasks go elsewhere)."""
        return [slot for slot, handle in enumerate(self.arbiters) if id(handle) in self._answered]

    def quarantine(self, key: str) -> Any:
        """A fresh arbiter for one suspect task of run ``key`` alone; `release` it when that task is done."""
        with self.lock:
            handle = factory.arbiter(self.members, [self.runs[key]], self._live_node(None))
            self._quarantined[handle] = key
            return handle

    def release(self, handle: Any) -> None:
        import ray

        with self.lock:
            if self._quarantined.pop(handle, None) is not None:
                ray.kill(handle, no_restart=True)

    # ------------------------------------------------------------ heartbeat

    def check(self) -> None:
        """Handle the pings that came back or are overdue; send the next round of pings when due."""
        with self.lock:
            self._check()

    def _check(self) -> None:
        import ray

        now = self.clock()
        if self._pings:
            ready, _ = ray.wait(list(self._pings), num_returns=len(self._pings), timeout=0, fetch_local=False)
            for ref in ready:
                ping = self._pings.pop(ref)
                try:
                    ray.get(ref)
                except Exception as exc:
                    self._died(ping, exc)
                else:
                    self._answered[id(ping.handle)] = ping.handle
                    self._placing_deaths.pop((ping.kind, ping.index), None)
            for ref, ping in list(self._pings.items()):
                wait = patience(self.place_timeout_s if ping.placing else self.hung_after_s, *machine_load())
                overdue = now - ping.sent > wait
                if overdue and self._frozen(ping, now):
                    del self._pings[ref]
                    self._hung(ping)
        if now - self._last_beat >= self.heartbeat_s:
            self._last_beat = now
            pinged = {id(p.handle) for p in self._pings.values()}
            for kind, index, handle in self._actors():
                if handle is not None and id(handle) not in pinged:
                    self._pings[handle.__ray_ready__.remote()] = _Ping(kind, index, handle, now)
            self._count_restarts()

    def _count_restarts(self) -> None:
        """Add to `disturbances` the role members' restarts since the last heartbeat, and one for each member
        not serving now (restarting, or still starting: its callers wait)."""
        for kind, _index, handle in self._actors():
            if handle is None or kind in ("grader", "arbiter"):
                continue
            state, restarts = actor_state(handle)
            before = self._restarts.get(id(handle))
            self._restarts[id(handle)] = restarts
            if before is not None and restarts > before:
                self.disturbances += restarts - before
            self.disturbances += state != "ALIVE"

    def _frozen(self, ping: _Ping, now: float) -> bool:
        """Whether an overdue ping means a frozen actor: ALIVE, and not restarted since the ping was first
        found overdue. Otherwise the ping's clock starts again (the actor is starting, or just restarted)."""
        state, restarts = actor_state(ping.handle)
        if ping.placing:
            return state != "ALIVE"
        if state == "ALIVE" and restarts == ping.restarts:
            return True
        ping.sent, ping.restarts = now, restarts if state == "ALIVE" else -1
        return False

    def _actors(self) -> list[tuple[Kind, int, Any]]:
        """Every actor of the fleet, by slot (None for a member slot whose replacement could not be placed)."""
        found: list[tuple[Kind, int, Any]] = [
            (name, i, m) for name, ms in self.members.items() for i, m in enumerate(ms)
        ]
        return found + [("arbiter", i, a) for i, a in enumerate(self.arbiters)]

    def _died(self, ping: _Ping, exc: BaseException) -> None:
        import ray.exceptions as rex

        cause = cause_of(exc)
        if ping.kind != "arbiter":
            self.disturbances += 1
        if isinstance(cause, rex.ActorUnavailableError) and not ping.placing:
            return  # restarting in place: Ray re-sends its calls
        log.warning("redraft: %s %d died (%s); replacing it", ping.kind, ping.index, describe(exc))
        if ping.kind == "arbiter":
            self.arbiter_lost(ping.index, ping.handle)
        elif self._current(ping) is ping.handle:
            self._replace_member(ping.kind, ping.index, failed_placement=ping.placing and self._tried_out(ping))

    def _tried_out(self, ping: _Ping) -> bool:
        """Count the death of a replacement before it answered; whether its slot has had `place_tries` of them."""
        self._placing_deaths[ping.kind, ping.index] += 1
        return self._placing_deaths[ping.kind, ping.index] >= self.place_tries

    def _hung(self, ping: _Ping) -> None:
        import ray

        if self._current(ping) is not ping.handle:
            return
        if ping.placing and ping.kind != "arbiter":  # a replacement that never started: give its slot up
            ray.kill(ping.handle, no_restart=True)
            self._replace_member(ping.kind, ping.index, failed_placement=True)
            return
        log.warning("redraft: %s %d did not answer for %g s; killing it", ping.kind, ping.index, self.hung_after_s)
        self.replaced += 1
        if ping.kind == "arbiter":  # its tasks fail with it and are redone
            ray.kill(ping.handle, no_restart=True)
            self.arbiter_lost(ping.index, ping.handle)
        else:  # Ray restarts it in place and re-sends the calls it held
            self.disturbances += 1
            ray.kill(ping.handle, no_restart=False)

    def _current(self, ping: _Ping) -> Any:
        if ping.kind == "arbiter":
            return self.arbiters[ping.index]
        return self.members[ping.kind][ping.index]

    def _replace_member(self, kind: RoleName, index: int, *, failed_placement: bool) -> None:
        """Rebuild member ``index`` of ``kind`` on a live node, or give its slot up when that failed already."""
        slots = self.members[kind]
        member: Any = None
        if not failed_placement:
            node = self._live_node(self._nodes[index] if index < len(self._nodes) else None, avoid=index)
            member = factory.member(kind, node, self.cpus[kind])
            self._pings[member.__ray_ready__.remote()] = _Ping(kind, index, member, self.clock(), placing=True)
            self.replaced += 1
        slots[index] = member
        if kind != "grader":
            for arbiter in [*self.arbiters, *self._quarantined]:
                arbiter.replace_member.remote(kind, index, member)
        if all(m is None for m in slots):
            raise ClusterError(
                f"the {kind} role cannot be placed on any live node (its last replacement died {self.place_tries} "
                f"times before it answered, or did not start within {self.place_timeout_s:g} s); finished tasks are "
                "kept: rerun with the same --out once the cluster has room"
            )

    def _live_node(self, preferred: str | None, *, avoid: int = -1) -> str:
        """``preferred`` if it is alive, else a live node (spread by ``avoid``); `ClusterError` if none is."""
        nodes = alive_nodes()
        if not nodes:
            raise ClusterError("no live Ray node is left; rerun with the same --out once the cluster is back")
        if preferred in nodes:
            return preferred
        return nodes[(avoid + 1) % len(nodes)] if avoid >= 0 else nodes[len(self._quarantined) % len(nodes)]

    def shutdown(self) -> None:
        """Kill every actor of the fleet, so no call of its runs goes on once the driver stops."""
        import ray

        with self.lock:
            for _kind, _index, handle in self._actors():
                if handle is not None:
                    ray.kill(handle, no_restart=True)
            for handle in self._quarantined:
                ray.kill(handle, no_restart=True)
            self._quarantined.clear()
            self._pings.clear()
