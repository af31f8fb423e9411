"""Whether a run's settings fit its scenario and strategy, checked once before anything starts.

A combination that cannot work (a strategy that runs plans on a scenario with no files; candidates to execute
where the sandbox cannot be built) is a `UserError`; one that works but gives less than the scenario or the
strategy needs (too few tokens for its answers, too few samples) is a `RedraftWarning`, said once per process.
"""

from __future__ import annotations

import warnings

from redraft.config import Experiment
from redraft.errors import RedraftWarning, UserError
from redraft.sandbox import isolation
from redraft.scenarios import Scenario
from redraft.strategies import Strategy


def check_fit(experiment: Experiment, scenario: Scenario, strategy: Strategy) -> None:
    """`UserError` for a strategy, a scenario and settings that cannot run together; a warning for each
    shortfall."""
    check_plans(strategy, scenario)
    for shortfall in shortfalls(experiment, scenario, strategy):
        warnings.warn(shortfall, RedraftWarning, stacklevel=1)  # one place: each said once per process
    if scenario.check_cost == "executes" and isolation.view_problem() is not None:
        raise UserError(isolation.refusal(scenario.name))


def shortfalls(experiment: Experiment, scenario: Scenario, strategy: Strategy) -> list[str]:
    """What the run gives less of than its scenario or strategy needs to do its work, each with the reason."""
    said = []
    if experiment.max_tokens < scenario.draft_tokens:
        said.append(
            f"{scenario.name}'s answers need about {scenario.draft_tokens:,} tokens and --max-tokens "
            f"{experiment.max_tokens} cuts them short; pass --max-tokens {scenario.draft_tokens}"
        )
    wanted = strategy.min_samples
    if experiment.samples < wanted:
        said.append(
            f"{experiment.strategy} needs at least {wanted} --samples to do what it is for, and was given "
            f"{experiment.samples}; pass --samples {wanted}"
        )
    return said


def check_plans(strategy: Strategy, scenario: Scenario) -> None:
    """`UserError` for a strategy that executes plans (``plan_execute``) on a scenario with no files to run over."""
    if strategy.executes_plans and not scenario.has_workspace:
        raise UserError(
            f"{strategy.name} runs each step of a plan over the task's files; scenario {scenario.name!r} has none "
            "(pipeline has)"
        )
