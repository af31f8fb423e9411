"""A run resolved once: its config, the user's check and grade functions and the backends, made objects.

Invariant: `resolve_run` is where a run's names become objects: its scenario, its strategy, its roles'
backends and prompts (`RoleSetup`), its rules with one value each and its prices (`ArbiterSettings`),
its share of a batch's budget, where it writes and where its tasks come from (with the secret that seeds
their hidden parts, `redraft.rundir.RunSecret`), and its identity. Every
entry point (`redraft.refine`, `redraft.run`, `redraft.estimate`, a comparison's lanes, a tune's
evaluations) resolves its config here, once, before anything starts, and everything after reads these
objects: nothing below takes the config apart again or looks a scenario or a strategy up by name (the
layout test holds the second; the role actors and the arbiter resolve the names they are sent once, in
their constructors). A bad name, file or setting is a `UserError` here. No Ray, no I/O but reading the
files the config names (a prompts file, a task file, a price table).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import msgspec

from redraft.config import Budgets, Experiment, RunConfig, Runtime
from redraft.engine._identity import identity, manifest, out_of
from redraft.engine._rules import ArbiterSettings
from redraft.engine.setup import BackendOverrides, RoleSetup, arbiter_settings, role_setup, with_check
from redraft.errors import UserError
from redraft.protocols.messages import Task
from redraft.rundir import RunSecret, fingerprint
from redraft.scenarios import Scenario, get_scenario
from redraft.scenarios.taskfile import iter_tasks
from redraft.scenarios.user_check import CheckFunction
from redraft.strategies import Strategy, get_strategy

TaskSource = Callable[[], Iterator[Task]]
"""A run's tasks, streamed afresh at each call (a task file is read lazily, a scenario's tasks generated)."""


@dataclass(frozen=True)
class ResolvedRun:
    """One run, resolved (see the module docstring)."""

    config: RunConfig
    """As given (with a check function's scenario named): what the manifest records."""
    scenario: Scenario
    strategy: Strategy
    setup: RoleSetup
    settings: ArbiterSettings
    out: Path
    tasks: TaskSource
    identity: dict[str, Any]

    @property
    def experiment(self) -> Experiment:
        return self.config.experiment

    @property
    def budgets(self) -> Budgets:
        return self.config.budgets

    @property
    def runtime(self) -> Runtime:
        return self.config.runtime

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.identity)

    def manifest(self) -> dict[str, Any]:
        """A new run directory's ``manifest.json`` for this run."""
        return manifest(self.config, self.identity, self.out.name)

    def with_setup(self, **changes: Any) -> ResolvedRun:
        """This run with some of its roles' setup changed (a lane's share of the CPUs, the payer of its calls)."""
        return dataclasses.replace(self, setup=dataclasses.replace(self.setup, **changes))

    def with_settings(self, **changes: Any) -> ResolvedRun:
        """This run with some of its arbiters' settings changed (its id and batch, a call deadline)."""
        return dataclasses.replace(self, settings=msgspec.structs.replace(self.settings, **changes))


def resolve_run(
    config: RunConfig,
    *,
    check: CheckFunction | None = None,
    grade: CheckFunction | None = None,
    backends: BackendOverrides | None = None,
    task: Task | None = None,
    secret: RunSecret | None = None,
) -> ResolvedRun:
    """``config`` (steered by ``check`` and graded by ``grade``, its roles' backends replaced by ``backends``)
    resolved once; `UserError` on the first bad name, file or setting. ``task``: the one task of a
    `redraft.refine`, in place of the config's. ``secret``: the one its generated tasks are seeded with, when
    their scenario `hides_gold` (a comparison's, its lanes share); None: the one its own directory keeps."""
    config = with_check(config, check, grade)
    out = out_of(config)
    scenario, strategy = get_scenario(config.experiment.scenario), get_strategy(config.experiment.strategy)
    setup = role_setup(config, scenario, strategy, backends)
    assert setup.prompts is not None  # role_setup loads them
    return ResolvedRun(
        config=config,
        scenario=scenario,
        strategy=strategy,
        setup=setup,
        settings=arbiter_settings(config, setup),
        out=out,
        tasks=(lambda: iter([task])) if task is not None else task_source(config, scenario, secret or RunSecret(out)),
        identity=identity(config, setup.prompts, setup.judge.templates if setup.judge else None),
    )


def shares_batch(strategy: str) -> bool:
    """Whether the strategy named ``strategy`` spends to a batch's budget (``--calls-per-task``,
    ``--tokens-per-task``): a comparison keeps that budget for its arms that do; `UserError` for an unknown name."""
    return get_strategy(strategy).shares_batch


def task_source(config: RunConfig, scenario: Scenario, secret: RunSecret) -> TaskSource:
    """Where the run's tasks come from: its task file (validated by `role_setup`), or its scenario's own, made
    with ``secret`` (read when they are first made) if it `hides_gold`; `UserError` for a scenario that has
    none of its own and no task file."""
    experiment, limit = config.experiment, config.runtime.limit
    if experiment.tasks is None and scenario.needs_task_file:
        raise UserError(f"the scenario {experiment.scenario!r} has no tasks of its own: give --tasks FILE.jsonl")

    def tasks() -> Iterator[Task]:
        if experiment.tasks is not None:
            return islice(iter_tasks(experiment.tasks, scenario, experiment.columns), limit)
        if scenario.hides_gold:
            return islice(scenario.secret_tasks(seed=experiment.seed, secret=secret.read()), limit)
        return islice(scenario.tasks(seed=experiment.seed), limit)

    return tasks
