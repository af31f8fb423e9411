"""Resolving a config into what the roles and arbiters are built from: every name checked before anything starts."""

from __future__ import annotations

from redraft.actors.factory import RoleSetup
from redraft.backends.base import BackendSpec
from redraft.backends.pricing import load_prices
from redraft.backends.registry import resolve
from redraft.config import RunConfig
from redraft.engine.arbiter import ArbiterSettings
from redraft.engine.prompt_files import load_prompts
from redraft.scenarios import get_scenario
from redraft.scenarios.taskfile import validate_task_file
from redraft.strategies import get_strategy

BackendOverrides = dict[str, BackendSpec]
"""Per-role backend objects (``drafter``, ``critic``, ``verifier``) that replace the config's spec strings
(the Python API and tests)."""


def role_setup(config: RunConfig, backends: BackendOverrides | None = None) -> RoleSetup:
    """Validate the config and resolve every name in it; `UserError` on the first bad one."""
    config.validate()
    experiment = config.experiment
    load_prices(config.runtime.prices)
    get_scenario(experiment.scenario)
    if experiment.tasks is not None:
        validate_task_file(experiment.tasks, experiment.scenario)  # every line made a task, before anything starts
    get_strategy(experiment.strategy)
    backends = backends or {}
    drafter = backends.get("drafter") or resolve(experiment.drafter)
    critic = backends.get("critic") or resolve(experiment.critic)
    verifier = backends.get("verifier") or (resolve(experiment.verifier) if experiment.verifier else None)
    return RoleSetup(
        scenario=experiment.scenario,
        drafter=drafter,
        critic=critic,
        verifier=verifier,
        temperature=experiment.temperature,
        draft_max_tokens=experiment.max_tokens,
        cache=config.runtime.cache,
        oracle=experiment.oracle_feedback,
        prompts=load_prompts(experiment.prompts),  # a bad prompts file fails here, before any actor starts
    )


def check_prompts(path: str | None) -> None:
    """A prompts file's entries checked (`redraft.engine.prompt_files`), for callers outside the actors' room."""
    load_prompts(path)


def arbiter_settings(config: RunConfig) -> ArbiterSettings:
    """What every arbiter of the run is given: the strategy, K, the seed, convergence, prices, revision mode."""
    experiment = config.experiment
    return ArbiterSettings(
        strategy=experiment.strategy,
        samples=experiment.samples,
        seed=experiment.seed,
        repeat=experiment.repeat,
        convergence=config.convergence(),
        prices=load_prices(config.runtime.prices),
        revision_mode="patch" if experiment.patch else "rewrite",
    )
