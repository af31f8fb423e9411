"""A run's roles as cast: how each is made, and what follows from its setup and strategy, worked out once.

`Cast.of` is the one place that reads a `RoleSetup` with its `Strategy` to say which roles the strategy needs
and how each is made (the same constructors build the roles in one process, `redraft.engine._refine`, and
inside Ray actors, `redraft.actors`), which model the verifier asks, which endpoint each role calls, and which
roles pace themselves. A `ResolvedRun` holds its cast as a field, made again only when its setup changes
(`ResolvedRun.with_setup`); the estimate, the factory, the placement, the dispatcher and its breaker read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redraft.backends.base import BackendSpec
from redraft.backends.local import paces_itself
from redraft.engine._model_role import CallSettings
from redraft.engine.critic import Critic
from redraft.engine.drafter import Drafter
from redraft.engine.grader import Grader
from redraft.engine.resolution._roles import RoleSetup
from redraft.engine.verifier import Verifier
from redraft.protocols.messages import RoleName
from redraft.strategies import Strategy

Constructor = tuple[type, tuple[Any, ...], dict[str, Any]]
"""How one role is made: its class, positional and keyword arguments (plain data, so it can travel)."""


@dataclass(frozen=True)
class Cast:
    """A run's roles, worked out once from its setup and strategy (see the module docstring)."""

    setup: RoleSetup
    roles: dict[RoleName, Constructor]
    """How each role the strategy needs is made, by role name (the grader is apart: it is not in the loop)."""
    grader: Constructor
    """How the run's grader is made: the judge's (``--judge``, with the run's templates), or the scenario's own."""
    verifier_model: BackendSpec | None
    """The verifier's model: only strategies that ask it questions get one (``--verifier``, else the drafter's)."""
    endpoints: dict[str, str]
    """The backend spec each role's calls go to, by `RoleName` (to say which endpoint is down)."""
    paced: frozenset[RoleName]
    """The model roles whose backend is the embedded model (or a local GGUF file): their calls fail only when
    the model stops making progress (`redraft.backends._progress`), never at the role-call deadline."""

    @classmethod
    def of(cls, setup: RoleSetup, strategy: Strategy) -> Cast:
        """The cast of ``setup`` as ``strategy`` plays it."""
        verifier = (setup.verifier or setup.drafter) if strategy.verifier_model else None
        return cls(
            setup=setup,
            roles=_constructors(setup, strategy, verifier),
            grader=grader_constructor(setup),
            verifier_model=verifier,
            endpoints=_endpoints(setup, verifier),
            paced=paced_roles(setup),
        )


def paced_roles(setup: RoleSetup) -> frozenset[RoleName]:
    """The model roles of ``setup`` that pace themselves (`Cast.paced`)."""
    local = {role for role, spec in (("drafter", setup.drafter), ("critic", setup.critic)) if paces_itself(spec)}
    return frozenset(local | ({"self_critic"} if "drafter" in local else set()))  # type: ignore[arg-type]


def _constructors(setup: RoleSetup, strategy: Strategy, verifier: BackendSpec | None) -> dict[RoleName, Constructor]:
    drafts = CallSettings(setup.temperature, setup.draft_max_tokens, setup.cache, setup.prompts, setup.payer)
    roles: dict[RoleName, Constructor] = {
        "drafter": (Drafter, (setup.drafter, setup.scenario, drafts), {"escalate": setup.escalate}),
        "verifier": (
            Verifier,
            (setup.scenario, verifier),
            {"cache": setup.cache, "oracle": setup.oracle, "prompts": setup.prompts, "payer": setup.payer},
        ),
    }
    critic_role = strategy.critic_role
    critiques = CallSettings(
        setup.critic_temperature, setup.critique_max_tokens, setup.cache, setup.prompts, setup.payer
    )
    if critic_role == "critic":
        roles["critic"] = (Critic, (setup.critic, critiques), {})
    elif critic_role == "self_critic":
        roles["self_critic"] = (Critic, (setup.drafter, critiques), {})
    return roles


def grader_constructor(setup: RoleSetup) -> Constructor:
    """How the grader of ``setup`` is made (`Cast.grader`)."""
    judge = setup.judge
    if judge is None:
        return (Grader, (setup.scenario,), {})
    made: dict[str, Any] = {"cache": setup.cache, "payer": setup.payer, "prompts": setup.prompts}
    if judge.batched:
        made["deadline_s"] = None  # a judgment waits for its batch: `--batch-wait` bounds it
    return (judge.grader, (judge.backend, *judge.args), made)


def _endpoints(setup: RoleSetup, verifier: BackendSpec | None) -> dict[str, str]:
    endpoints: dict[str, str] = {
        "drafter": setup.drafter.spec,
        "critic": setup.critic.spec,
        "self_critic": setup.drafter.spec,
    }
    if verifier is not None:
        endpoints["verifier"] = verifier.spec
    if setup.judge is not None:
        endpoints["judge"] = setup.judge.spec
    return endpoints
