"""The one place that makes a fleet's Ray actors (role members, graders and arbiters), and says what of a run
they are given: each role as the run plays it (`run_roles`, `grader_role`), and what the run needs of the fleet
(`actor_roles`).

Placement: one member of each role per alive node, pinned with hard node affinity
(soft affinity placed a third to a half of the members on another node than the one
named, so the samples of a round did not spread). The arbiter sends sample k of a
task to member (offset + k) mod n, so the K samples of a round land on distinct
nodes whenever K <= nodes. What each reserves, and which roles run inside the
arbiter or the driver instead of an actor of their own, is `redraft.actors._placement`.
No actor is made with a run's settings: a fleet's actors serve every run that leases them
(`redraft.actors._leases`).

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

from collections.abc import Sequence
from typing import Any

from redraft.actors._arbiter import ArbiterActor, ArbiterRun, Crew
from redraft.actors._members import ACTOR_CLASSES, RunRole
from redraft.actors._placement import cpus_of, grades_on_driver, verifies_in_arbiter
from redraft.actors._ray import on_node
from redraft.engine.grader import Grader
from redraft.engine.resolution import Cast
from redraft.protocols.messages import RoleName
from redraft.scenarios import provided

_ROLE_OPTIONS: dict[str, Any] = {"max_restarts": -1, "max_task_retries": 3, "max_concurrency": 1000}


def actor_roles(cast: Cast) -> dict[RoleName, float]:
    """The roles a run needs actors of (the grader's included), with the CPUs each of its actors reserves."""
    setup = cast.setup
    names: list[RoleName] = [n for n in cast.roles if not _in_arbiter(cast, n)]
    if setup.judge is not None or not grades_on_driver(setup):
        names.append("grader")
    return {name: cpus_of(setup, name) for name in names}


def run_roles(key: str, cast: Cast) -> tuple[dict[RoleName, RunRole], dict[RoleName, RunRole]]:
    """Each role of the run as its actors play it, and the roles its arbiters run themselves, under ``key``."""
    made = provided()
    roles = {name: RunRole(f"{key}/{name}", constructor, made) for name, constructor in cast.roles.items()}
    local = {name: role for name, role in roles.items() if _in_arbiter(cast, name)}
    return {name: role for name, role in roles.items() if name not in local}, local


def grader_role(key: str, cast: Cast) -> Any:
    """The run's grader as its actors play it (the judge's, when the run has one); for a scenario whose grade is
    instant, a plain `Grader` the driver runs itself (`Grader.grade_here`): a grade of microseconds is not worth an
    actor and a hop."""
    setup = cast.setup
    if setup.judge is None and grades_on_driver(setup):
        return Grader(setup.scenario)
    return RunRole(f"{key}/grader", cast.grader, provided())


def _in_arbiter(cast: Cast, role: RoleName) -> bool:
    return role == "verifier" and verifies_in_arbiter(cast)


def member(role: RoleName, node: str, cpus: float) -> Any:
    """One member of ``role`` (a grader too) as a Ray actor pinned to ``node``, at start or to replace one that
    died; it serves every run of its fleet."""
    import ray

    actor_class: Any = ray.remote(ACTOR_CLASSES[role])
    options = {"num_cpus": cpus, "scheduling_strategy": on_node(node), **_ROLE_OPTIONS}
    return actor_class.options(**options).remote()


def arbiter(crew: Crew, runs: Sequence[ArbiterRun], node: str | None = None) -> Any:
    """An arbiter actor (on ``node``, when given) calling ``crew``, serving ``runs`` from the start."""
    import ray

    options: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 10_000}
    if node is not None:
        options["scheduling_strategy"] = on_node(node)
    return ray.remote(ArbiterActor).options(**options).remote(crew, list(runs))
