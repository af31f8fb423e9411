"""The fleets of one command, and each run's share of one: what a run's dispatcher sees as its fleet.

A command that runs many runs (``redraft tune``'s evaluations, ``redraft compare``'s lanes) holds one `Fleets`
and asks it for a `Lease` per run. Shared (the default), every run is served by one `redraft.actors._fleet.Fleet`
made for what its actors reserve (the CPUs of a verifier that executes candidates): it starts with the first run
that needs it, grows the roles later runs need, and stops when the command ends (`Fleets.shutdown`), so a run
starts no process of its own. Per run (``REDRAFT_FLEET=per-run``, and always for a single ``redraft run``), each
lease gets a fleet of its own, stopped as its run ends.

A long-lived holder (a server) gives its `Fleets` an ``idle_s``: a shared fleet whose runs have all ended and
that no lease asks for within ``idle_s`` seconds is stopped (its actors killed, their processes and reserved CPUs
freed), and the next lease starts a new one, as the first did. A command's fleets keep no such timer (``idle_s``
None): they stop with the command.

Nothing a run's results depend on differs between the two: each run's roles are made from that run's own
settings (`redraft.actors._members.RunRole`), in every actor that serves it, and a task's seeds are its run's.
A role that cannot be made for a run (its backend client, its prompts) stops that run as it opens
(`BackendError`), before any task is sent.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from redraft.actors import _factory as factory
from redraft.actors._arbiter import ArbiterRun
from redraft.actors._fleet import Fleet
from redraft.actors._members import RunRole
from redraft.engine.arbiter import ArbiterSettings
from redraft.engine.resolution import Cast
from redraft.errors import BackendError, UserError, describe, member_failure
from redraft.protocols.messages import RoleName

FLEET_ENV = "REDRAFT_FLEET"
MODES = ("shared", "per-run")
"""``shared``: one fleet for a command's runs; ``per-run``: a fleet per run (to measure against, or to isolate)."""


def shared_by_default() -> bool:
    """Whether a command's runs share a fleet, as ``REDRAFT_FLEET`` says (shared when unset)."""
    mode = os.environ.get(FLEET_ENV, "shared")
    if mode not in MODES:
        raise UserError(f"{FLEET_ENV}={mode!r} is not a fleet mode; known: {', '.join(MODES)}")
    return mode == "shared"


class Lease:
    """One run's share of a fleet: the run opened on its arbiters and made in its members (see the module
    docstring); the fleet's arbiters, heartbeat and replacements, as the run's dispatcher and grading ask."""

    def __init__(self, fleet: Fleet, cast: Cast, settings: ArbiterSettings) -> None:
        self.fleet = fleet
        self.key = uuid.uuid4().hex
        """Names the run on every actor of the fleet."""
        roles, local = factory.run_roles(self.key, cast)
        self.run = ArbiterRun(self.key, settings, roles, local)
        self.grader = factory.grader_role(self.key, cast)
        """The run's grader as the grader actors play it; a plain `Grader` the driver runs (an instant grade)."""
        self._open()

    def _open(self) -> None:
        """The run opened on every arbiter and its roles made in every member, awaited; a role that cannot be made
        is a `BackendError` (an actor that dies meanwhile is the heartbeat's, as during the run)."""
        import ray

        calls = self.fleet.open(self.run)
        roles: dict[RoleName, RunRole] = dict(self.run.roles)
        if isinstance(self.grader, RunRole):
            roles["grader"] = self.grader
        with self.fleet.lock:
            for name, role in roles.items():
                calls += [m.serve_many.remote(role.key, [], role) for m in self.fleet.members[name] if m is not None]
        ready, late = ray.wait(calls, num_returns=len(calls), timeout=self.fleet.start_timeout_s)
        if late:
            self.close()
            raise BackendError(f"role actors did not take the run within {self.fleet.start_timeout_s:g} s")
        for ref in ready:
            try:
                ray.get(ref)
            except Exception as exc:
                if not member_failure(exc):
                    self.close()
                    raise BackendError(f"a role actor failed to start: {describe(exc)}") from None

    @property
    def arbiters(self) -> list[Any]:
        return self.fleet.arbiters

    @property
    def nodes(self) -> int:
        return self.fleet.nodes

    def serving(self) -> list[int]:
        return self.fleet.serving()

    @property
    def graders(self) -> list[Any]:
        """The grader actors the run asks (`ask_grader`), or its one plain `Grader` for instant grades."""
        if isinstance(self.grader, RunRole):
            return self.fleet.members["grader"]
        return [self.grader]

    @property
    def disturbances(self) -> int:
        return self.fleet.disturbances

    def ask_grader(self, grader: Any, frame: bytes) -> Any:
        """A grade request frame sent to the grader actor ``grader``, with the run's grader role: its reference."""
        assert isinstance(self.grader, RunRole)
        return grader.serve.remote(self.grader.key, frame, self.grader)

    def quarantine(self) -> Any:
        return self.fleet.quarantine(self.key)

    def release(self, handle: Any) -> None:
        self.fleet.release(handle)

    def arbiter_lost(self, slot: int | None, handle: Any) -> None:
        self.fleet.arbiter_lost(slot, handle)

    def check(self) -> None:
        self.fleet.check()

    def close(self) -> None:
        self.fleet.close(self.key)


class Fleets:
    """The fleets of one command or of a long-lived holder (see the module docstring); `shutdown` when it ends."""

    def __init__(
        self,
        shared: bool | None = None,
        *,
        idle_s: float | None = None,
        on_stop: Callable[[Fleet], None] | None = None,
    ) -> None:
        self.shared = shared_by_default() if shared is None else shared
        if idle_s is not None and idle_s < 0:
            raise UserError(f"a fleet's idle time must be 0 s or more, not {idle_s:g}")
        self.idle_s = idle_s
        """Seconds a shared fleet with no run open waits for one before it stops; None: it waits for `shutdown`."""
        self._on_stop = on_stop
        """Told of each fleet stopped because it stayed idle, after its actors were killed."""
        self._fleets: list[Fleet] = []
        self._lock = threading.Lock()
        self._held: Counter[Fleet] = Counter()
        """Leases asked of each fleet and not yet released: one with any is not idle."""
        self._timers: dict[Fleet, threading.Timer] = {}
        """The idle timer of each fleet that has one running."""

    def lease(self, cast: Cast, settings: ArbiterSettings) -> Lease:
        """A share of a fleet that fits the run of ``cast``, started or grown for it first."""
        roles = factory.actor_roles(cast)
        with self._lock:
            fits = [f for f in self._fleets if f.fits(roles)] if self.shared else []
            fleet = fits[0] if fits else Fleet()
            if not fits:
                self._fleets.append(fleet)
            self._held[fleet] += 1
            timer = self._timers.pop(fleet, None)
        if timer is not None:
            timer.cancel()
        try:
            fleet.grow(roles)
        except BaseException:  # what started is killed: a fleet that fails to start serves no run
            self._unhold(fleet)
            self._drop(fleet)
            raise
        try:
            return Lease(fleet, cast, settings)
        except BaseException:
            left = self._unhold(fleet)
            if not self.shared:
                self._drop(fleet)
            elif left == 0 and self.idle_s is not None:
                self._idle(fleet)  # a run that could not open leaves the fleet as idle as it found it
            raise

    def release(self, lease: Lease) -> None:
        """``lease``'s run has ended: closed on its fleet if shared (which stops once idle, given ``idle_s``),
        else the fleet stopped with it."""
        if not self.shared:
            self._unhold(lease.fleet)
            self._drop(lease.fleet)
            return
        lease.close()
        if self._unhold(lease.fleet) == 0 and self.idle_s is not None:
            self._idle(lease.fleet)

    def _unhold(self, fleet: Fleet) -> int:
        """One lease of ``fleet`` fewer; how many it still has."""
        with self._lock:
            self._held[fleet] -= 1
            left = self._held[fleet]
            if left <= 0:
                del self._held[fleet]
            return max(left, 0)

    def _idle(self, fleet: Fleet) -> None:
        """Start ``fleet``'s idle timer: it stops after ``idle_s`` unless a lease asks for it first."""
        assert self.idle_s is not None
        timer = threading.Timer(self.idle_s, self._stop_if_idle, (fleet,))
        timer.daemon = True
        with self._lock:
            if self._held[fleet] or fleet not in self._fleets:
                return
            old, self._timers[fleet] = self._timers.get(fleet), timer
        if old is not None:
            old.cancel()
        timer.start()

    def _stop_if_idle(self, fleet: Fleet) -> None:
        with self._lock:
            if self._timers.get(fleet) is not threading.current_thread() or self._held[fleet] or fleet.runs:
                return  # leased again meanwhile (its timer cancelled, or another started since)
            del self._timers[fleet]
            self._fleets.remove(fleet)  # no lease finds it from here on
        fleet.shutdown()
        if self._on_stop is not None:
            self._on_stop(fleet)

    def _drop(self, fleet: Fleet) -> None:
        fleet.shutdown()
        with self._lock:
            if fleet in self._fleets:
                self._fleets.remove(fleet)

    def shutdown(self) -> None:
        """Stop every fleet, so no call of the command goes on once it ends."""
        with self._lock:
            fleets, self._fleets = self._fleets, []
            timers, self._timers = list(self._timers.values()), {}
        for timer in timers:
            timer.cancel()
        for fleet in fleets:
            fleet.shutdown()
