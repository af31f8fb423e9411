"""Where roles run, read from what a scenario declares its checks cost: instant checks are the arbiter's,
instant grades the driver's, checks that execute code reserve a CPU."""

from __future__ import annotations

import asyncio

import pytest

from redraft.actors import _factory as factory
from redraft.actors._placement import cpus_of, grades_on_driver, verifies_in_arbiter
from redraft.backends.scripted import ScriptedSpec
from redraft.engine.grader import Grader
from redraft.engine.resolution import Cast, RoleSetup
from redraft.engine.verifier import Verifier
from redraft.protocols.messages import CandidateText, GradeRequest
from redraft.scenarios import get_scenario
from redraft.strategies import get_strategy

SPEC = ScriptedSpec(script=["Answer: 1"])


def setup(scenario: str) -> RoleSetup:
    """A run's roles on ``scenario``, with what it resolves of the scenario: what its checks cost."""
    return RoleSetup(scenario=scenario, drafter=SPEC, critic=SPEC, check_cost=get_scenario(scenario).check_cost)


@pytest.mark.parametrize(
    ("scenario", "cost"),
    [
        ("arithmetic", "instant"),
        ("json_extract", "instant"),
        ("constrained_writing", "instant"),
        ("incident", "instant"),
        ("humaneval", "executes"),
        ("sql", "blocking"),
    ],
)
def test_scenarios_declare_what_their_checks_cost(scenario: str, cost: str) -> None:
    assert get_scenario(scenario).check_cost == cost


def test_instant_checks_are_run_by_the_arbiter_unless_a_verifier_model_is_asked() -> None:
    assert verifies_in_arbiter(Cast.of(setup("arithmetic"), get_strategy("adversarial")))
    assert not verifies_in_arbiter(
        Cast.of(setup("arithmetic"), get_strategy("cove"))
    )  # its questions go to the verifier's model
    assert not verifies_in_arbiter(Cast.of(setup("sql"), get_strategy("adversarial")))
    adversarial = get_strategy("adversarial")
    assert "verifier" not in factory.actor_roles(Cast.of(setup("arithmetic"), adversarial))  # no actor of its own
    actors, local = factory.run_roles("run", Cast.of(setup("arithmetic"), adversarial))  # Ray is not asked
    assert list(local) == ["verifier"] and "verifier" not in actors
    assert isinstance(local["verifier"].make(), Verifier)  # made by each arbiter, from the run's settings


def test_only_a_verifier_that_executes_candidates_reserves_a_cpu() -> None:
    assert cpus_of(setup("humaneval"), "verifier") == 1.0
    assert cpus_of(setup("humaneval"), "grader") == 0.0
    assert cpus_of(setup("sql"), "verifier") == 0.0 and cpus_of(setup("humaneval"), "drafter") == 0.0


@pytest.mark.parametrize("scenario", ["arithmetic", "json_extract", "constrained_writing", "incident"])
def test_an_instant_grade_is_the_driver_s_own_and_equals_the_grader_actor_s(scenario: str) -> None:
    assert grades_on_driver(setup(scenario))
    assert "grader" not in factory.actor_roles(Cast.of(setup(scenario), get_strategy("adversarial")))
    grader = factory.grader_role("run", Cast.of(setup(scenario), get_strategy("adversarial")))  # Ray is not asked
    assert isinstance(grader, Grader)
    task = next(get_scenario(scenario).tasks(seed=0))
    texts = ["Answer: 5", '{"name": "x"}', "Answer: 5", "Some words here."]
    request = GradeRequest(
        task=task, candidates=[CandidateText(round=0, sample=k, text=t) for k, t in enumerate(texts)]
    )
    assert grader.grade_here(request) == asyncio.run(grader.grade(request))
