"""The fleets of one command, and each run's share of one: what a run's dispatcher sees as its fleet.

A command that runs many runs (``redraft tune``'s evaluations, ``redraft compare``'s lanes) holds one `Fleets`
and asks it for a `Lease` per run. Shared (the default), every run is served by one `redraft.actors._fleet.Fleet`
made for what its actors reserve (the CPUs of a verifier that executes candidates): it starts with the first run
that needs it, grows the roles later runs need, and stops when the command ends (`Fleets.shutdown`), so a run
starts no process of its own. Per run (``REDRAFT_FLEET=per-run``, and always for a single ``redraft run``), each
lease gets a fleet of its own, stopped as its run ends.

Nothing a run's results depend on differs between the two: each run's roles are made from that run's own
settings (`redraft.actors._members.RunRole`), in every actor that serves it, and a task's seeds are its run's.
A role that cannot be made for a run (its backend client, its prompts) stops that run as it opens
(`BackendError`), before any task is sent.
"""

from __future__ import annotations

import os
import threading
import uuid
from typing import Any

from redraft.actors import _factory as factory
from redraft.actors._arbiter import ArbiterRun
from redraft.actors._fleet import Fleet
from redraft.actors._members import RunRole
from redraft.engine.arbiter import ArbiterSettings
from redraft.engine.setup import RoleSetup
from redraft.errors import BackendError, UserError, describe, member_failure
from redraft.protocols.messages import RoleName
from redraft.strategies import Strategy

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

    def __init__(self, fleet: Fleet, setup: RoleSetup, strategy: Strategy, settings: ArbiterSettings) -> None:
        self.fleet = fleet
        self.key = uuid.uuid4().hex
        """Names the run on every actor of the fleet."""
        roles, local = factory.run_roles(self.key, setup, strategy)
        self.run = ArbiterRun(self.key, settings, roles, local)
        self.grader = factory.grader_role(self.key, setup)
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
    """The fleets of one command (see the module docstring); `shutdown` when the command ends."""

    def __init__(self, shared: bool | None = None) -> None:
        self.shared = shared_by_default() if shared is None else shared
        self._fleets: list[Fleet] = []
        self._lock = threading.Lock()

    def lease(self, setup: RoleSetup, strategy: Strategy, settings: ArbiterSettings) -> Lease:
        """A run's share of a fleet that fits it, started or grown for it first."""
        roles = factory.actor_roles(setup, strategy)
        with self._lock:
            fits = [f for f in self._fleets if f.fits(roles)] if self.shared else []
            fleet = fits[0] if fits else Fleet()
            if not fits:
                self._fleets.append(fleet)
        try:
            fleet.grow(roles)
        except BaseException:  # what started is killed: a fleet that fails to start serves no run
            self._drop(fleet)
            raise
        try:
            return Lease(fleet, setup, strategy, settings)
        except BaseException:
            if not self.shared:
                self._drop(fleet)
            raise

    def release(self, lease: Lease) -> None:
        """``lease``'s run has ended: closed on its fleet if shared, else the fleet stopped with it."""
        if self.shared:
            lease.close()
        else:
            self._drop(lease.fleet)

    def _drop(self, fleet: Fleet) -> None:
        fleet.shutdown()
        with self._lock:
            if fleet in self._fleets:
                self._fleets.remove(fleet)

    def shutdown(self) -> None:
        """Stop every fleet, so no call of the command goes on once it ends."""
        with self._lock:
            fleets, self._fleets = self._fleets, []
        for fleet in fleets:
            fleet.shutdown()
