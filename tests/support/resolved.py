"""A config's identity and a new run directory's manifest, as a run resolves them (`resolve_run`), for tests and
benchmarks that write a run directory in this process. Neither resolves the roles' backends: a config naming a
provider's model needs no key for its identity."""

from __future__ import annotations

from typing import Any

from redraft.config import RunConfig
from redraft.engine.prompt_files import load_prompts
from redraft.engine.resolution import _identity
from redraft.scenarios.taskfile import task_file_identity


def identity(config: RunConfig) -> dict[str, Any]:
    """What decides the results of a run of ``config``: the fingerprint's input (its task file and rubric hashed
    here, as their checks hash them in a run)."""
    experiment = config.experiment
    return _identity.identity(
        config,
        load_prompts(experiment.prompts),
        tasks=task_file_identity(experiment.tasks) if experiment.tasks is not None else None,
        rubric=task_file_identity(experiment.rubric) if experiment.rubric is not None else None,
    )


def manifest_for(config: RunConfig, run_id: str) -> dict[str, Any]:
    """A new run directory's ``manifest.json`` for ``config``, its ``run_id`` (the directory's name) given."""
    return _identity.manifest(config, identity(config), run_id)
