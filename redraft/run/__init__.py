"""Running refinement: the config (defaults said once), `run` on Ray, `refine` in-process."""

from redraft.run.config import Budgets, Experiment, RunConfig, Runtime
from redraft.run.dispatcher import failed_result
from redraft.run.driver import RunOutcome, identity, manifest_for, plan, run
from redraft.run.local import Refinement, refine, refine_frames
from redraft.run.roles import BackendOverrides, arbiter_settings, check_prompts, role_setup

__all__ = [
    "BackendOverrides",
    "Budgets",
    "Experiment",
    "Refinement",
    "RunConfig",
    "RunOutcome",
    "Runtime",
    "arbiter_settings",
    "check_prompts",
    "failed_result",
    "identity",
    "manifest_for",
    "plan",
    "refine",
    "refine_frames",
    "role_setup",
    "run",
]
