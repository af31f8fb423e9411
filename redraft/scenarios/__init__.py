"""Task suites: tasks, the prompts that ask for them, and the checks that judge them."""

from redraft.protocols.stages import DEFAULT_STAGES, Stage
from redraft.scenarios.base import (
    Scenario,
    check_stage,
    checks_cheaply,
    get_scenario,
    scenario,
    scenario_names,
    score_of,
    stages_of,
)

__all__ = [
    "DEFAULT_STAGES",
    "Scenario",
    "Stage",
    "check_stage",
    "checks_cheaply",
    "get_scenario",
    "scenario",
    "scenario_names",
    "score_of",
    "stages_of",
]
