"""The regression of "20/20" on Ray: a model whose every answer only exits scores nothing in a real run.

The attacks one by one, in feedback and in grade, are tests/unit/scenarios/test_humaneval_attacks.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from redraft.rundir import result_records


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_a_model_that_only_exits_scores_nothing_in_a_real_run(ray_cluster: Any, tmp_path: Path) -> None:
    """The regression of "20/20": `raise SystemExit(0)` as every answer, through the CLI."""
    from redraft.cli import main

    out = tmp_path / "run"
    args = [
        "run",
        "humaneval",
        "--model",
        "scripted:tests.support.replies:exits_zero",
        "--strategy",
        "none",
        "--limit",
        "20",
    ]
    main([*args, "--out", str(out)])
    records = result_records(out)
    assert len(records) == 20
    assert [r["graded_pass"] for r in records] == [False] * 20  # graded, every one, and failed
    assert [r["passed"] for r in records] == [False] * 20


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_a_model_that_steals_the_data_set_from_elsewhere_on_the_machine_scores_nothing(
    ray_cluster: Any, tmp_path: Path
) -> None:
    """The regression of "6 of 6": every answer reads the canonical solution of its problem from any copy of the
    data set it can find (one planted world-readable, as another environment holds one), through the CLI."""
    from redraft.cli import main
    from tests.support.grade_hunters import planted

    out = tmp_path / "run"
    model = "scripted:tests.support.grade_hunters:thief"
    with planted():
        main(["run", "humaneval", "--model", model, "--strategy", "none", "--limit", "6", "--out", str(out)])
    records = result_records(out)
    assert len(records) == 6 and not any(r["error"] for r in records)
    assert [r["graded_pass"] for r in records] == [False] * 6
