"""The public API on Ray: `run` and `compare` docstring examples run as written, and a check given as a
function defined here (not importable by name in a worker) steers a run's verifier actors."""

from __future__ import annotations

import doctest
from pathlib import Path
from typing import Any

import pytest

import redraft
from redraft import Plugins, RunConfig, run
from redraft.backends.scripted import ScriptedSpec
from redraft.rundir import result_records
from tests.support.task_files import write_lines

pytestmark = pytest.mark.ray


@pytest.mark.parametrize("function", [redraft.run, redraft.compare], ids=lambda f: f.__name__)
def test_a_docstring_example_runs_as_written_on_ray(ray_cluster: Any, function: object) -> None:
    [test] = doctest.DocTestFinder(recurse=False).find(function, globs={})
    assert test.examples
    result = doctest.DocTestRunner().run(test)
    assert result.failed == 0 and result.attempted == len(test.examples)


def test_a_check_given_as_a_function_runs_in_the_verifier_actors(ray_cluster: Any, tmp_path: Path) -> None:
    calls: list[str] = []  # stays empty here: the check runs in the actors, on its copy

    def ends_with_the_answer(text: str, data: dict[str, Any]) -> tuple[float, str]:
        calls.append(text)
        return float(text.strip().endswith(str(data["answer"]))), "end with the answer"

    tasks = write_lines(
        tmp_path / "tasks.jsonl",
        {"id": "a", "prompt": "What is 3 + 4?", "reference": {"answer": "7"}},
        {"id": "b", "prompt": "What is 2 + 2?", "reference": {"answer": "4"}},
    )
    model = ScriptedSpec(script=lambda request: "I think it is 7")
    config = RunConfig.build(tasks=str(tasks), samples=1, max_rounds=1, out=str(tmp_path / "run"))
    outcome = run(config, Plugins(check=ends_with_the_answer, backends={"drafter": model, "critic": model}))
    records = {r["task_id"]: r for r in result_records(tmp_path / "run")}
    assert (records["a"]["passed"], records["b"]["passed"]) == (True, False)
    assert outcome.summary.tasks == 2 and calls == []
    assert records["a"]["scenario"].startswith("check:tests.integration.test_public_api_on_ray:")
