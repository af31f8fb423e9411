"""The run config: three groups, defaults said once, the fingerprint from the experiment alone, bounds named."""

from __future__ import annotations

import math

import msgspec
import pytest

from redraft import RunConfig
from redraft.config import GROUPS, Budgets, Experiment, Runtime, flag, setting_aliases
from redraft.errors import UserError
from redraft.rundir import fingerprint
from tests.support.resolved import identity


def test_build_routes_each_flat_setting_to_its_group() -> None:
    config = RunConfig.build(samples=5, task_budget_usd=0.5, task_timeout=30.0, budget_calls=100, limit=7, cache=False)
    assert config.experiment == Experiment(samples=5, task_budget_usd=0.5)
    assert config.budgets == Budgets(task_timeout=30.0, budget_calls=100)
    assert config.runtime == Runtime(limit=7, cache=False)
    assert config.replace(samples=2).experiment.samples == 2 and config.replace(samples=2).runtime.limit == 7
    with pytest.raises(UserError, match=r"unknown setting 'sample' \(did you mean 'samples'\? known: .*samples"):
        RunConfig.build(sample=3)


def test_an_alias_names_its_field_and_a_setting_is_given_once() -> None:
    assert RunConfig.build(max_in_flight=4).runtime.max_tasks_in_flight == 4
    with pytest.raises(UserError, match="--max-in-flight is another name of --max-tasks-in-flight: give one"):
        RunConfig.build(max_tasks_in_flight=8, max_in_flight=4)


def test_every_setting_has_one_name_in_one_group_and_help_in_a_panel() -> None:
    names = [name for struct in GROUPS.values() for name in struct.__struct_fields__]
    assert len(names) == len(set(names))  # a flat setting names one field
    assert set(RunConfig().flat()) == set(names)
    assert not set(setting_aliases()) & set(names)  # an alias never hides a field
    from redraft.config import PANELS, description

    for struct in GROUPS.values():
        for name in struct.__struct_fields__:
            assert description(struct, name).description, name
            assert (description(struct, name).extra or {})["panel"] in PANELS, name


def test_only_the_experiment_enters_the_fingerprint() -> None:
    base = RunConfig.build(samples=2)
    same = base.replace(task_timeout=9.0, budget_usd=3.0, limit=4, cache=False, max_tasks_in_flight=2, out="x")
    assert fingerprint(identity(same)) == fingerprint(identity(base))
    for change in ({"samples": 3}, {"task_budget_tokens": 500}, {"critic": "scripted:m:f"}, {"patch": True}):
        assert fingerprint(identity(base.replace(**change))) != fingerprint(identity(base)), change
    assert set(identity(base)) == set(Experiment.__struct_fields__) | {"prompts", "prompt_overrides"}
    assert identity(base)["calls_per_task"] is None  # unset settings are in the fingerprint too, as null
    budgeted = base.replace(strategy="adaptive", calls_per_task=4)
    assert identity(budgeted)["calls_per_task"] == 4
    mapped = base.replace(columns="prompt=question")  # which column is the prompt changes every task
    assert identity(mapped)["columns"] == "prompt=question"
    assert fingerprint(identity(mapped)) != fingerprint(identity(base))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"samples": 0}, "--samples must be in [1, 1,000], got 0"),
        ({"threshold": -0.1}, "--threshold must be in [0, 1], got -0.1"),
        ({"temperature": 2.5}, "--temperature must be in [0, 2], got 2.5"),
        ({"budget_usd": math.nan}, "--budget-usd must be a finite number, got nan"),
        ({"task_timeout": math.inf}, "--task-timeout must be a finite number, got inf"),
        ({"task_timeout": 0.0}, "--task-timeout must be in (0, 10,000,000], got 0"),
        ({"budget_calls": 0}, "--budget-calls must be in [1, 1,000,000], got 0"),
        ({"max_tasks_in_flight": 0}, "--max-tasks-in-flight must be in [1, 1,000,000], got 0"),
        ({"samples": "3"}, "--samples: Expected `int`, got `str`"),
    ],
)
def test_a_bad_value_names_its_flag_and_range(settings: dict[str, object], message: str) -> None:
    with pytest.raises(UserError) as raised:
        RunConfig.build(**settings).validate()
    assert str(raised.value) == message


def test_the_defaults_are_valid_and_the_flags_are_the_field_names() -> None:
    RunConfig().validate()
    assert flag("max_tasks_in_flight") == "--max-tasks-in-flight"
    assert msgspec.to_builtins(RunConfig())["experiment"]["samples"] == 3
