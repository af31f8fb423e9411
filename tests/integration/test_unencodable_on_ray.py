"""The measured breaks of lone surrogates, on Ray through the CLI: no task leaves the graded rate, none ends for them.

- HumanEval, 4 right and 4 whose function raises ``ValueError("\\ud800")`` in the real sandbox subprocess: once
  graded 100 % (4/4; 4 not graded), their grades unencodable; it is 50 % (4/8), in ``run`` and in a ``compare``
  lane alike.
- SQL, every model reply holding a lone surrogate (raw, as a backend decoded it): once each task ended as
  ``ProtocolError`` with 0 calls and 0 tokens and left the graded rate (3/6 read 3/3); it is 3/6, every call kept.

Unit tests of each entry point, in every scenario: tests/unit/engine/test_unencodable_text.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from redraft.cli import main
from redraft.rundir import result_records

pytestmark = pytest.mark.ray

HUMANEVAL = "scripted:tests.support.unencodable:humaneval_half_raising"


def records(out: Path) -> list[dict[str, Any]]:
    return result_records(out)


@pytest.mark.timeout(600)
def test_four_right_and_four_raising_unencodable_messages_grade_50_percent_of_8(
    ray_cluster: Any, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    main(["run", "humaneval", "--model", HUMANEVAL, "--strategy", "none", "--limit", "8", "--out", str(out)])
    got = {r["task_id"]: r for r in records(out)}
    assert len(got) == 8 and not any(r["error"] for r in got.values())
    assert {t: r["graded_pass"] for t, r in got.items()} == {f"HumanEval/{i}": i % 2 == 0 for i in range(8)}
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["graded"], summary["graded_passed"], summary["graded_pass_rate"]) == (8, 4, 0.5)


@pytest.mark.timeout(900)
def test_a_compare_lane_keeps_the_raising_tasks_in_its_graded_rate(ray_cluster: Any, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    argv = ["compare", "humaneval", "--arms", "none", "--model", HUMANEVAL, "--samples", "1", "--max-rounds", "1"]
    main([*argv, "--baseline-samples", "2", "--limit", "8", "--out", str(out)])
    comparison = json.loads((out / "comparison.json").read_text())
    arm = comparison["arms"][0]
    assert (arm["tasks"], arm["ungraded"], arm["pass_rate"]) == (8, 0, 0.5)
    assert arm["grade_errors"] == {}  # each grade was made: a failure, its message plain
    assert comparison["tasks"] == 8


@pytest.mark.timeout(600)
def test_model_replies_with_lone_surrogates_keep_their_sql_tasks_graded_and_paid(
    ray_cluster: Any, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    model = "scripted:tests.support.unencodable:sql_half_right"
    main(["run", "sql", "--model", model, "--strategy", "none", "--limit", "6", "--out", str(out)])
    got = {r["task_id"]: r for r in records(out)}
    assert len(got) == 6 and not any(r["error"] for r in got.values())
    assert {t: r["graded_pass"] for t, r in got.items()} == {f"sql-{i:03d}": i % 2 == 0 for i in range(6)}
    assert all(r["usage"]["calls"] == 1 and r["usage"]["output_tokens"] > 0 for r in got.values())
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["graded"], summary["graded_passed"], summary["usage"]["calls"]) == (6, 3, 6)
