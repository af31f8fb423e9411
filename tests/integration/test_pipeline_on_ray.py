"""The pipeline scenario on Ray: a task's files travel in its frame to the verifier and grader actors, whose
sandboxes run the program over them; the naive program's quirks show in the grade, not in the feedback alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from redraft import RunConfig, run
from redraft.backends.scripted import ScriptedSpec
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.ray

REFERENCE = (REPO_ROOT / "tests" / "support" / "pipeline_reference.py").read_text()
SOLVED = "```python\n" + REFERENCE.replace('p.name != "output.csv"', 'p.name not in ("output.csv", "main.py")') + "```"


def test_a_pipeline_run_executes_each_program_in_the_sandbox_and_grades_its_table(
    ray_cluster: Any, tmp_path: Path
) -> None:
    solved = ScriptedSpec(script=lambda request: SOLVED)
    config = RunConfig.build(
        scenario="pipeline", strategy="verifier_only", samples=1, max_rounds=1, limit=4, out=str(tmp_path / "run")
    )
    summary = run(config, backends={"drafter": solved, "critic": solved}).summary
    assert (summary.tasks, summary.passed, summary.graded, summary.graded_passed) == (4, 4, 4, 4)
    naive = ScriptedSpec(script=lambda request: SOLVED.replace("solve(inputs)", "naive(inputs)"))
    worse = run(config.replace(out=str(tmp_path / "naive")), backends={"drafter": naive, "critic": naive}).summary
    assert worse.graded == 4 and worse.graded_passed < 4
