"""Task suites: tasks, the prompts that ask for them, the feedback that steers and the grade that scores.

A scenario subclasses `Scenario` and registers with `@scenario("name")`; `get_scenario` makes one by name.
"""

from redraft.protocols.stages import DEFAULT_STAGES, Stage
from redraft.scenarios._base import (
    CheckCost,
    Scenario,
    get_scenario,
    provide,
    provided,
    scenario,
    scenario_names,
    score_of,
)

__all__ = [
    "DEFAULT_STAGES",
    "CheckCost",
    "Scenario",
    "Stage",
    "get_scenario",
    "provide",
    "provided",
    "scenario",
    "scenario_names",
    "score_of",
]
