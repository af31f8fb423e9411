"""The one place that makes the run's Ray actors: role members, graders and arbiters.

Placement: one member of each role per alive node, pinned with hard node affinity
(soft affinity placed a third to a half of the members on another node than the one
named, so the samples of a round did not spread). The arbiter sends sample k of a
task to member (offset + k) mod n, so the K samples of a round land on distinct
nodes whenever K <= nodes. What each reserves, and which roles run inside the
arbiter or the driver instead of an actor of their own, is `redraft.actors._placement`.

Faults: a role actor that dies is restarted without limit, and a call in flight on
it is retried up to 3 times (a call that kills its actor every time then fails, and
the task is redone and, at worst, stopped as a poison task). A member pinned to a
node that died cannot restart: its calls fail at once (``ActorUnschedulableError``),
the arbiter routes them to the next member, and the driver builds one replacement
on a live node (`member`, `redraft.actors._fleet`). Arbiters are not restarted by Ray
(their constructor holds actor handles, which Ray cannot replay safely); the driver
replaces a dead one.
"""

from __future__ import annotations

from typing import Any

from redraft.actors._arbiter import ArbiterActor
from redraft.actors._members import ACTOR_CLASSES
from redraft.actors._placement import cpus_of, grades_on_driver, verifies_in_arbiter
from redraft.actors._ray import alive_nodes, on_node
from redraft.engine.arbiter import ArbiterSettings
from redraft.engine.grader import Grader
from redraft.engine.setup import RoleSetup, grader_constructor, role_constructors
from redraft.protocols.messages import RoleName
from redraft.scenarios import provided
from redraft.strategies import Strategy

_ROLE_OPTIONS: dict[str, Any] = {"max_restarts": -1, "max_task_retries": 3, "max_concurrency": 1000}

Members = dict[RoleName, list[Any]]
"""Each loop role's members by slot: an actor handle, a role object the arbiters run themselves, or None (a
slot whose replacement could not be placed)."""


def members(setup: RoleSetup, strategy: Strategy, nodes: list[str] | None = None) -> Members:
    """One member of each role the strategy needs per node."""
    nodes = nodes or alive_nodes()
    names = role_constructors(setup, strategy)
    return {name: [member(setup, strategy, name, n) for n in nodes] for name in names}


def member(setup: RoleSetup, strategy: Strategy, role: RoleName, node: str) -> Any:
    """One member of ``role`` as a Ray actor pinned to ``node`` (at start, or to replace one that died); the
    verifier of instant checks is a plain object instead, which each arbiter runs itself."""
    constructor = role_constructors(setup, strategy)[role]
    if role == "verifier" and verifies_in_arbiter(setup, strategy):
        cls, args, kwargs = constructor
        return cls(*args, **kwargs)
    return _actor(role, constructor, node, cpus_of(setup, role))


def grader(setup: RoleSetup, node: str) -> Any:
    """A grader actor pinned to ``node`` (the judge's, when the run has one); for a scenario whose grade is
    instant, a plain `Grader` the driver runs itself (`Grader.grade_here`): a grade of microseconds is not worth
    an actor and a hop."""
    if setup.judge is not None:
        return _actor("judge", grader_constructor(setup), node, cpus_of(setup, "judge"))
    if grades_on_driver(setup):
        return Grader(setup.scenario)
    return _actor("grader", grader_constructor(setup), node, cpus_of(setup, "grader"))


def _actor(role: RoleName, constructor: tuple[type, tuple[Any, ...], dict[str, Any]], node: str, cpus: float) -> Any:
    import ray

    actor_class: Any = ray.remote(ACTOR_CLASSES[role])
    options = {"num_cpus": cpus, "scheduling_strategy": on_node(node), **_ROLE_OPTIONS}
    return actor_class.options(**options).remote(constructor, provided())


def arbiter(crew: Members, settings: ArbiterSettings, node: str | None = None) -> Any:
    """An arbiter actor (on ``node``, when given) calling ``crew``."""
    import ray

    options: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 10_000}
    if node is not None:
        options["scheduling_strategy"] = on_node(node)
    return ray.remote(ArbiterActor).options(**options).remote(crew, settings, provided())
