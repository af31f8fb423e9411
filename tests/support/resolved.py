"""A config's identity and a new run directory's manifest, as a run resolves them (`resolve_run`), for tests and
benchmarks that write a run directory in this process. Neither resolves the roles' backends: a config naming a
provider's model needs no key for its identity."""

from __future__ import annotations

from typing import Any

from redraft.config import RunConfig
from redraft.engine.prompt_files import load_prompts
from redraft.engine.resolution import _identity


def identity(config: RunConfig) -> dict[str, Any]:
    """What decides the results of a run of ``config``: the fingerprint's input."""
    return _identity.identity(config, load_prompts(config.experiment.prompts))


def manifest_for(config: RunConfig, run_id: str) -> dict[str, Any]:
    """A new run directory's ``manifest.json`` for ``config``, its ``run_id`` (the directory's name) given."""
    return _identity.manifest(config, identity(config), run_id)
