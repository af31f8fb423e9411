"""A run's role backends and prompts, resolved once: `RoleSetup`, what every role of the run is built from.

`role_setup` turns the config's backend specs into objects (or takes the Python API's own, `BackendOverrides`),
makes the run's judge (``--judge``) and reads its prompts file, once: a bad spec, rubric or prompts file is a
`UserError` here, on the caller's side, before any role exists. How each role is then made from the setup is the
run's `redraft.engine.resolution.Cast`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from redraft.backends import batchable
from redraft.backends.base import BackendSpec
from redraft.backends.registry import resolve
from redraft.config import Experiment, RunConfig
from redraft.engine.grader import GRADERS, JudgeAsk, JudgeSetup
from redraft.engine.prompt_files import load_prompts
from redraft.engine.prompts import Prompts
from redraft.errors import UserError
from redraft.protocols.messages import RoleName
from redraft.scenarios import CheckCost, Scenario

BackendOverrides = dict[RoleName | Literal["escalate"], BackendSpec]
"""Per-role backend objects (``drafter``, ``critic``, ``verifier``, ``judge``, and ``escalate``: the stronger model,
when the config names one) that replace the config's spec strings (the Python API and tests)."""


@dataclass(frozen=True)
class RoleSetup:
    """Everything needed to start the roles of one run."""

    scenario: str
    drafter: BackendSpec
    critic: BackendSpec
    verifier: BackendSpec | None = None
    escalate: BackendSpec | None = None
    """The stronger model every drafter also holds (``--escalate``): it drafts the requests that say so."""
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
    cpu_share: float = 1.0
    """The share of a CPU an actor that runs candidates reserves (`redraft.actors._placement`): a comparison's
    lanes run side by side and split the nodes between them."""
    payer: str = ""
    """Whose money the roles' calls are (`CallSettings.payer`): the run directory's id, set once it is open."""
    check_cost: CheckCost = "blocking"
    """What the scenario's checks and grade cost (`Scenario.check_cost`): where verifiers and graders are placed
    (`redraft.actors._placement`)."""
    judge: JudgeSetup | None = None
    """The run's judge (``--judge``): it grades every finished task in place of the scenario's grade."""


def role_setup(config: RunConfig, scenario: Scenario, backends: BackendOverrides | None = None) -> RoleSetup:
    """The roles' backends (``backends``' objects over the config's spec strings, resolved), the judge and the
    prompts (its prompts file read once); `UserError` on the first bad spec, file or combination."""
    experiment = config.experiment
    made = _backends(experiment, backends or {})
    drafter, critic, verifier, escalate = made["drafter"], made["critic"], made.get("verifier"), made.get("escalate")
    judge = judge_setup(experiment, scenario, drafter, made.get("judge"))
    # a bad prompts file fails here, before any role starts; it may hold the judge's entries when there is one
    prompts = load_prompts(experiment.prompts, judge.templates if judge else None)
    judged_by = judge.backend if judge else None
    if config.runtime.batch and not any(batchable(s) for s in (drafter, critic, verifier, judged_by)):
        shown = ", ".join(sorted({s.spec for s in (drafter, critic, judged_by) if s is not None}))
        raise UserError(
            f"--batch sends model calls through the batch APIs of openai: and anthropic:; this run's models "
            f"({shown}) have none: run it without --batch"
        )
    return RoleSetup(
        scenario=experiment.scenario,
        check_cost=scenario.check_cost,
        drafter=drafter,
        critic=critic,
        verifier=verifier,
        escalate=escalate,
        temperature=experiment.temperature,
        draft_max_tokens=experiment.max_tokens,
        cache=config.runtime.cache,
        oracle=experiment.oracle_feedback,
        prompts=prompts,
        judge=judge if judge is None else dataclasses.replace(judge, prompts=_versions(prompts, judge.templates)),
    )


def _backends(experiment: Experiment, given: BackendOverrides) -> BackendOverrides:
    """Each role's backend, the API's object (``given``) or the config's spec resolved: the drafter's and the
    critic's always, a verifier's and a judge's where one is given or named, an escalation's where ``--escalate``
    names one (it decides the strategy's actions)."""
    named: dict[RoleName | Literal["escalate"], str | None] = {
        "drafter": experiment.drafter,
        "critic": experiment.critic,
        "verifier": experiment.verifier,
        "judge": experiment.judge,
        "escalate": experiment.escalate,
    }
    wanted = [role for role, spec in named.items() if spec is not None or (role in given and role != "escalate")]
    return {role: given.get(role) or resolve(named[role] or "") for role in wanted}


def judge_setup(
    experiment: Experiment, scenario: Scenario, drafter: BackendSpec, backend: BackendSpec | None
) -> JudgeSetup | None:
    """The run's judge, of its model ``backend`` (``--judge``, or the API's object), or None without one;
    `UserError` for a rubric without a judge or one that cannot be read (`GRADERS`' ``judge`` reads it)."""
    if backend is None:
        if experiment.rubric is not None:
            raise UserError("--rubric is the judge's: give --judge MODEL to grade by it")
        return None
    ask = JudgeAsk(backend=backend, rubric=experiment.rubric, scenario=scenario, repeats=experiment.judge_repeats)
    made = GRADERS.get("judge")(ask)
    return dataclasses.replace(made, self_judged=made.spec == drafter.spec)


def _versions(prompts: Prompts, judge: Prompts) -> dict[str, int]:
    """The versions of the judge's templates as the run loaded them (a prompts file may give its own)."""
    return {name: version for name, version in prompts.versions().items() if name in judge.templates}
