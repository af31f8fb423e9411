"""The public Python API: what `redraft` offers by name, each docstring example run as written, a user's check
and grade given as functions, settings named as the command line's flags."""

from __future__ import annotations

import doctest

import pytest

import redraft
from redraft import RunConfig, Task, refine
from redraft.backends.scripted import ScriptedSpec
from redraft.errors import UserError


def test_the_package_offers_the_public_api_and_nothing_else() -> None:
    assert sorted(redraft.__all__) == sorted(
        [
            "Comparison",
            "ComparisonOutcome",
            "Estimate",
            "Refinement",
            "Result",
            "RunConfig",
            "RunOutcome",
            "Task",
            "TuneOutcome",
            "TuneSettings",
            "compare",
            "estimate",
            "refine",
            "refine_async",
            "run",
            "tune",
        ]
    )
    assert all(callable(getattr(redraft, name)) for name in redraft.__all__)


@pytest.mark.parametrize("function", [redraft.refine, redraft.refine_async, redraft.estimate], ids=lambda f: f.__name__)
def test_a_docstring_example_runs_as_written(function: object) -> None:
    finder = doctest.DocTestFinder(recurse=False)
    [test] = finder.find(function, globs={})
    assert test.examples, "the docstring has an example"
    result = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS).run(test)
    assert result.failed == 0 and result.attempted == len(test.examples)


def test_a_check_and_a_grade_given_as_functions_steer_and_grade_held_out() -> None:
    seen: list[dict[str, object]] = []

    def says_paris(text: str, data: dict[str, object], prompt: str) -> tuple[float, str]:
        seen.append({"data": data, "prompt": prompt})
        return float("Paris" in text), "name the capital city"

    def exact(text: str, gold: dict[str, object]) -> bool:
        return text.strip() == gold["answer"]

    task = Task(task_id="fr", scenario="x", prompt="Capital of France?", gold={"answer": "Paris"})
    model = ScriptedSpec(script=lambda request: "Paris")
    done = refine(task, RunConfig.build(samples=1), check=says_paris, grade=exact, backends={"drafter": model})
    assert done.result.passed and done.result.graded_pass is True
    assert seen and all(s["prompt"] == "Capital of France?" and s["data"] == {} for s in seen)  # never the gold
    assert done.result.scenario == "check:tests.unit.test_public_api:" + says_paris.__qualname__ + ",grade:" + (
        "tests.unit.test_public_api:" + exact.__qualname__
    )


def test_settings_are_named_as_the_flags_model_included_and_a_lone_grade_is_refused() -> None:
    config = RunConfig.build(model="openai:gpt-4o-mini", samples=2, max_tasks_in_flight=4)
    assert (config.experiment.drafter, config.experiment.critic) == ("openai:gpt-4o-mini", "openai:gpt-4o-mini")
    both = RunConfig.build(model="openai:gpt-4o-mini", critic="anthropic:claude-haiku-4-5")
    assert both.experiment.critic == "anthropic:claude-haiku-4-5"
    with pytest.raises(UserError, match="a grade goes with a check"):
        refine(Task(task_id="t", scenario="arithmetic", prompt="?"), grade=lambda text, gold: True)
    with pytest.raises(UserError, match="arms is a list of strategy names"):
        redraft.compare(RunConfig.build(limit=1), "adversarial")  # type: ignore[arg-type]
