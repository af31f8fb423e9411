"""The public Python API: what `redraft` offers by name, each docstring example run as written, a user's check
and grade given as functions, settings named as the command line's flags."""

from __future__ import annotations

import dataclasses
import doctest
import inspect
import typing
from collections.abc import Callable

import pytest

import redraft
from redraft import CompareSettings, RunConfig, Task, refine
from redraft.backends.scripted import ScriptedSpec
from redraft.errors import UserError


def test_the_package_offers_the_public_api_and_nothing_else() -> None:
    assert sorted(redraft.__all__) == sorted(
        [
            "CompareHooks",
            "CompareSettings",
            "Comparison",
            "ComparisonOutcome",
            "Estimate",
            "Plugins",
            "Refinement",
            "Result",
            "RunConfig",
            "RunHooks",
            "RunOutcome",
            "Task",
            "TuneHooks",
            "TuneOutcome",
            "TunePlugins",
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


@pytest.mark.parametrize(
    "function",
    [
        redraft.refine,
        redraft.refine_async,
        redraft.estimate,
        redraft.Plugins,
        redraft.RunHooks,
        redraft.CompareSettings,
    ],
    ids=lambda f: f.__name__,
)
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
        redraft.compare(RunConfig.build(limit=1), CompareSettings("adversarial"))  # type: ignore[arg-type]


ENTRY_POINTS = [(redraft.run, None), (redraft.compare, redraft.CompareSettings), (redraft.tune, redraft.TuneSettings)]
HOOKS = {"run": redraft.RunHooks, "compare": redraft.CompareHooks, "tune": redraft.TuneHooks}


@pytest.mark.parametrize(("function", "settings"), ENTRY_POINTS, ids=["run", "compare", "tune"])
def test_run_compare_and_tune_take_the_config_their_settings_the_plugins_and_the_hooks(
    function: Callable[..., object], settings: type | None
) -> None:
    """Four parameters at most, each a public frozen dataclass with a docstring, and no loose keyword."""
    hooks = HOOKS[function.__name__]
    assert list(inspect.signature(function).parameters) == [
        "config",
        *(["settings"] if settings is not None else []),
        "plugins",
        "hooks",
    ]
    annotations = typing.get_type_hints(function)
    assert (annotations["plugins"], annotations["hooks"]) == (redraft.Plugins | None, hooks | None)
    assert settings is None or annotations["settings"] is settings
    for public in (redraft.Plugins, hooks, *([settings] if settings is not None else [])):
        assert public.__name__ in redraft.__all__ and public.__doc__
        assert dataclasses.is_dataclass(public) and public.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_a_tune_plugs_in_its_proposer_and_every_call_gets_hooks_of_its_own() -> None:
    """`TunePlugins` is a `Plugins` (check, grade and backends as `run`'s) with the proposer only a tune reads;
    hooks left out are made per call, so a comparison that sets its stop event on a failed lane leaves the next
    call's unset."""

    def proposer(request: object) -> None:
        return None

    plugged = redraft.TunePlugins(check=len, proposer=proposer)  # type: ignore[arg-type]
    assert isinstance(plugged, redraft.Plugins) and (plugged.check, plugged.proposer) == (len, proposer)
    assert redraft.RunHooks().stop is not redraft.RunHooks().stop
    assert (redraft.RunHooks().fleets, redraft.RunHooks().cpu_share) == (None, 1.0)
