"""Task suites: tasks, the prompts that ask for them, and the checks that judge them."""

from redraft.scenarios.base import Scenario, get_scenario, scenario, scenario_names, score_of

__all__ = ["Scenario", "get_scenario", "scenario", "scenario_names", "score_of"]
