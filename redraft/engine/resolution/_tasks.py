"""Where a run's tasks come from, resolved once: its task file, validated whole before anything starts (and
hashed for the run's identity in the same read), or its scenario's own tasks, made afresh at each call (those
whose gold is hidden seeded by the run's secret).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice

from redraft.config import RunConfig
from redraft.errors import UserError
from redraft.protocols.messages import Task
from redraft.rundir import RunSecret
from redraft.scenarios import Scenario
from redraft.scenarios.taskfile import TaskFile, read_task_file

TaskSource = Callable[[], Iterator[Task]]
"""A run's tasks, streamed afresh at each call (a task file is read lazily, a scenario's tasks generated)."""


def task_source(
    config: RunConfig, scenario: Scenario, secret: RunSecret, task: Task | None = None
) -> tuple[TaskSource, TaskFile | None]:
    """Where the run's tasks come from, and its task file when it has one: ``task`` alone when given
    (`redraft.refine`'s), else the task file's (every line or row checked here, in the read that hashes it), or
    its scenario's own (`own_tasks`); `UserError` for a bad task file, or a scenario with no tasks of its own and
    no task file."""
    experiment, limit = config.experiment, config.runtime.limit
    if experiment.tasks is None:
        return own_tasks(config, scenario, secret, task), None
    checked = read_task_file(experiment.tasks, scenario, experiment.columns)  # before anything starts
    return (lambda: iter([task])) if task is not None else (lambda: islice(checked.tasks(), limit)), checked


def own_tasks(config: RunConfig, scenario: Scenario, secret: RunSecret, task: Task | None = None) -> TaskSource:
    """A run without a task file: ``task`` alone when given, else its scenario's own tasks, made with ``secret``
    (read when they are first made) if it `hides_gold`."""
    experiment, limit = config.experiment, config.runtime.limit
    if experiment.columns is not None:
        raise UserError("--columns maps the columns of a task file: give it with --tasks FILE")
    if task is not None:
        return lambda: iter([task])
    if scenario.needs_task_file:
        raise UserError(f"the scenario {experiment.scenario!r} has no tasks of its own: give --tasks FILE.jsonl")
    if scenario.hides_gold:
        return lambda: islice(scenario.secret_tasks(seed=experiment.seed, secret=secret.read()), limit)
    return lambda: islice(scenario.tasks(seed=experiment.seed), limit)
