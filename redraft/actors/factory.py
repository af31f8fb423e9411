"""The one place that turns the plain role classes into Ray actors (or in-process objects).

Placement: one member of each role per alive node, pinned with hard node
affinity. (Soft affinity was tried and measured, again on Ray 2.60: created at
once or one by one, a third to a half of the members landed on another node than
the one named, so the samples of a round did not spread.) The arbiter sends sample
k of a task to member (offset + k) mod n, so the K samples of a round land on
distinct nodes whenever K <= nodes. Role actors are async and I/O-bound
(``num_cpus=0``); verifiers reserve what their scenario says (1 CPU when they
execute code). A scenario whose checks are cheap (`Scenario.cheap_check`) gets no verifier
actors at all: its verifier pool holds a plain `Verifier` that travels to each
arbiter and checks there, as a call of microseconds should, without two hops.

Faults: a role actor that dies is restarted without limit, and a call in flight
on it is retried up to 3 times (a call that kills its actor every time then
fails, and the task is redone and, at worst, stopped as a poison task). A member
pinned to a node that died cannot restart: its calls fail at once
(``ActorUnschedulableError``), the arbiter routes them to the next member, and
the driver builds one replacement on a live node (`ray_member`,
`redraft.actors.fleet`). Arbiters are not restarted by Ray (their constructor holds
actor handles, which Ray cannot replay safely); the driver replaces a dead one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redraft.backends.base import BackendSpec
from redraft.engine.arbiter import Arbiter, ArbiterSettings
from redraft.engine.critic import Critic
from redraft.engine.drafter import Drafter
from redraft.engine.grader import Grader
from redraft.engine.pools import RolePool, Roles
from redraft.engine.prompts import Prompts
from redraft.engine.verifier import Verifier
from redraft.errors import BackendError, describe
from redraft.runtime import alive_nodes, is_actor, on_node
from redraft.scenarios import checks_cheaply, get_scenario
from redraft.strategies import get_strategy

_ROLE_OPTIONS: dict[str, Any] = {"max_restarts": -1, "max_task_retries": 3, "max_concurrency": 1000}


@dataclass(frozen=True)
class RoleSetup:
    """Everything needed to start the roles of one run."""

    scenario: str
    drafter: BackendSpec
    critic: BackendSpec
    verifier: BackendSpec | None = None
    temperature: float = 0.8
    draft_max_tokens: int = 128
    critique_max_tokens: int = 512
    critic_temperature: float = 0.3
    cache: bool = True
    """Answer repeated model calls from the node's response cache (`redraft.backends.cache`)."""
    oracle: bool = False
    """Feed the held-out grade back as feedback (an oracle-feedback run: upper-bound studies only)."""
    prompts: Prompts | None = None
    """The templates the roles render (a prompts file's over the built-in ones); None: the built-in ones."""


def _members(setup: RoleSetup, strategy: str) -> dict[str, tuple[type, tuple[Any, ...], dict[str, Any]]]:
    """Constructor of each role the strategy needs: (class, args, kwargs)."""
    roles: dict[str, tuple[type, tuple[Any, ...], dict[str, Any]]] = {
        "drafter": (
            Drafter,
            (setup.drafter, setup.scenario),
            {
                "temperature": setup.temperature,
                "max_tokens": setup.draft_max_tokens,
                "cache": setup.cache,
                "prompts": setup.prompts,
            },
        ),
        "verifier": (
            Verifier,
            (setup.scenario, verifier_backend(setup, strategy)),
            {"cache": setup.cache, "oracle": setup.oracle, "prompts": setup.prompts},
        ),
    }
    critic_role = get_strategy(strategy).critic_role
    critic_kwargs = {
        "temperature": setup.critic_temperature,
        "max_tokens": setup.critique_max_tokens,
        "cache": setup.cache,
        "prompts": setup.prompts,
    }
    if critic_role == "critic":
        roles["critic"] = (Critic, (setup.critic,), critic_kwargs)
    elif critic_role == "self_critic":
        roles["self_critic"] = (Critic, (setup.drafter,), critic_kwargs)
    return roles


def verifier_backend(setup: RoleSetup, strategy: str) -> BackendSpec | None:
    """The verifier's model: only strategies that ask it questions get one (``--verifier``, else the drafter's)."""
    if not get_strategy(strategy).verifier_model:
        return None
    return setup.verifier or setup.drafter


def verifies_in_arbiter(setup: RoleSetup, strategy: str) -> bool:
    """Whether the arbiters verify drafts themselves: the scenario's checks are cheap (`Scenario.cheap_check`)
    and no verifier model is asked questions. A check of microseconds is not worth two hops between processes."""
    return checks_cheaply(get_scenario(setup.scenario)) and verifier_backend(setup, strategy) is None


def local_graders(setup: RoleSetup) -> RolePool:
    """The grader as an in-process object (`refine`)."""
    return RolePool([Grader(setup.scenario)])


def ray_grader(setup: RoleSetup, node: str) -> Any:
    """A grader actor pinned to ``node``; for a scenario whose grade is cheap, a plain `Grader` the driver runs
    itself (`Grader.grade_here`): a grade of microseconds is not worth an actor and a hop."""
    import ray

    if checks_cheaply(get_scenario(setup.scenario)):
        return Grader(setup.scenario)
    actor_class: Any = ray.remote(Grader)
    return actor_class.options(num_cpus=0, scheduling_strategy=on_node(node), **_ROLE_OPTIONS).remote(setup.scenario)


def local_roles(setup: RoleSetup, strategy: str) -> Roles:
    """The roles as plain in-process objects (tests and the no-cluster Python API)."""
    pools = {
        name: RolePool([cls(*args, **kwargs)], role=name)
        for name, (cls, args, kwargs) in _members(setup, strategy).items()
    }
    return Roles(**pools)


def ray_roles(setup: RoleSetup, strategy: str, nodes: list[str] | None = None) -> Roles:
    """The roles as Ray actors, one member of each per node."""
    nodes = nodes or alive_nodes()
    names = _members(setup, strategy)
    return Roles(**{name: RolePool([ray_member(setup, strategy, name, n) for n in nodes], role=name) for name in names})


def ray_member(setup: RoleSetup, strategy: str, role: str, node: str) -> Any:
    """One member of ``role`` as a Ray actor pinned to ``node`` (at start, or to replace one that died); the
    verifier of cheap checks is a plain object instead, which each arbiter runs itself (`verifies_in_arbiter`)."""
    import ray

    cls, args, kwargs = _members(setup, strategy)[role]
    if role == "verifier" and verifies_in_arbiter(setup, strategy):
        return cls(*args, **kwargs)
    cpus = get_scenario(setup.scenario).verifier_num_cpus if role == "verifier" else 0
    actor_class: Any = ray.remote(cls)
    return actor_class.options(num_cpus=cpus, scheduling_strategy=on_node(node), **_ROLE_OPTIONS).remote(
        *args, **kwargs
    )


def wait_ready(roles: Roles, *more: RolePool, actors: Sequence[Any] = (), timeout_s: float = 300.0) -> None:
    """Block until every role actor (and each of ``actors``) is constructed; raise its constructor's error once,
    up front.

    Without this, an actor that cannot start (a missing model file, an import
    error on a node) would surface as the same error in every task.
    """
    import ray

    refs = [m.__ray_ready__.remote() for pool in [*roles.pools(), *more] for m in pool.members if is_actor(m)]
    refs += [a.__ray_ready__.remote() for a in actors]
    try:
        ray.get(refs, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        raise BackendError(f"role actors did not start within {timeout_s:g} s (not enough resources?)") from None
    except ray.exceptions.RayActorError as exc:
        raise BackendError(f"a role actor failed to start: {describe(exc)}") from None


def ray_arbiter(roles: Roles, settings: ArbiterSettings, node: str | None = None) -> Any:
    import ray

    options: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 10_000}
    if node is not None:
        options["scheduling_strategy"] = on_node(node)
    return ray.remote(Arbiter).options(**options).remote(roles, settings)
