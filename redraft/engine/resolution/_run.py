"""`ResolvedRun`, a run resolved once, and `resolve_run`, the one place that makes it (see the package docstring)."""

from __future__ import annotations

import dataclasses
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from redraft.config import Budgets, Experiment, RunConfig, Runtime
from redraft.engine._rules import ArbiterSettings
from redraft.engine.resolution._arbiter import settings_of
from redraft.engine.resolution._cast import Cast
from redraft.engine.resolution._fit import check_fit
from redraft.engine.resolution._identity import identity, manifest
from redraft.engine.resolution._money import resolve_money
from redraft.engine.resolution._roles import BackendOverrides, RoleSetup, role_setup
from redraft.engine.resolution._tasks import TaskSource, task_source
from redraft.errors import UserError
from redraft.protocols.messages import Task
from redraft.rundir import RunSecret, fingerprint
from redraft.scenarios import Scenario, get_scenario, provide
from redraft.scenarios.user_check import CheckFunction, UserCheck
from redraft.strategies import Strategy, get_strategy


@dataclass(frozen=True)
class ResolvedRun:
    """One run, resolved (see the package docstring)."""

    config: RunConfig
    """As given (with a check function's scenario named): what the manifest records."""
    scenario: Scenario
    strategy: Strategy
    setup: RoleSetup
    settings: ArbiterSettings
    out: Path
    tasks: TaskSource
    identity: dict[str, Any]
    cast: Cast
    """The roles as the strategy plays them, made from ``setup`` once (and anew by `with_setup`, never elsewhere)."""

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
        """This run with some of its roles' setup changed (a lane's share of the CPUs, the payer of its calls,
        an estimate's doubles), its cast made anew from it."""
        return self.with_roles(dataclasses.replace(self.setup, **changes))

    def with_roles(self, setup: RoleSetup) -> ResolvedRun:
        """This run with its roles' setup replaced whole (its calls routed to the run's provider batches), its
        cast made anew from it: a setup swapped without its cast would make the roles as before."""
        return dataclasses.replace(self, setup=setup, cast=Cast.of(setup, self.strategy))

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
    config.validate()
    experiment, out = config.experiment, out_of(config)
    scenario, strategy = get_scenario(experiment.scenario), get_strategy(experiment.strategy)
    check_fit(experiment, scenario, strategy)
    tasks, task_file = task_source(config, scenario, secret or RunSecret(out), task)
    setup = role_setup(config, scenario, backends)
    money = resolve_money(config, strategy, setup)
    cast = Cast.of(setup, strategy)
    assert setup.prompts is not None  # role_setup loads them
    return ResolvedRun(
        config=config,
        scenario=scenario,
        strategy=strategy,
        setup=setup,
        settings=settings_of(config, money, cast.paced),
        out=out,
        tasks=tasks,
        identity=identity(
            config,
            setup.prompts,
            setup.judge.templates if setup.judge else None,
            tasks=task_file.identity if task_file else None,
            rubric=setup.judge.rubric_file if setup.judge else None,
        ),
        cast=cast,
    )


def with_check(config: RunConfig, check: CheckFunction | None, grade: CheckFunction | None = None) -> RunConfig:
    """``config`` steered by ``check`` and graded by ``grade``, functions given as objects (the Python API).

    They become a scenario named ``check:MODULE:QUALNAME`` (`UserCheck.of`), provided to this process and,
    through the actor system, to every actor of a run, so a function defined in a notebook works too.
    """
    if check is None:
        if grade is not None:
            raise UserError("a grade goes with a check: it grades the tasks the check steers")
        return config
    made = UserCheck.of(check, grade)
    provide(made)
    return config.replace(scenario=made.name)


def out_of(config: RunConfig) -> Path:
    """Where the run writes: ``--out``, or ``runs/<time>-<id>`` (nothing is checked or made here)."""
    if config.runtime.out:
        return Path(config.runtime.out)
    return Path("runs") / (time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6])


def shares_batch(strategy: str) -> bool:
    """Whether the strategy named ``strategy`` spends to a batch's budget (``--calls-per-task``,
    ``--tokens-per-task``): a comparison keeps that budget for its arms that do; `UserError` for an unknown name."""
    return get_strategy(strategy).shares_batch
