"""The gate says its verdict, also when nothing regressed, records it in comparison.json (a `gate` object: the
baseline, the verdict, each arm's delta), and warns when the baseline ran other tasks or another seed. Before:
``--baseline`` printed nothing when no arm regressed, comparison.json held no trace of the gate, and a baseline
of other tasks was held against silently.

`redraft compare` runs through `redraft.cli.main`, its lanes written in this process (no Ray) by the scripted
model of tests/unit/comparison/test_compare_feedback_basis.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from redraft.cli import _compare
from redraft.comparison._gate import Earlier, EarlierArm
from redraft.comparison._runner import ComparePlan
from tests.unit.comparison.test_compare_feedback_basis import CHECK, TASKS, lane
from tests.unit.test_cli import in_process


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each lane written in this process by the scripted model, on ``TASKS[:limit]``."""

    def write_lanes(plan: ComparePlan, **hooks: Any) -> dict[str, Any]:
        for planned in plan.lanes():
            lane(plan.out / planned.label, planned.config, tasks=TASKS[: plan.base.runtime.limit])
        return {}

    monkeypatch.setattr(_compare, "run_comparison", write_lanes)


def compare(out: Path, *extra: str, tasks: Path, limit: int = 6, seed: int = 0) -> list[str]:
    return [
        "compare",
        "--tasks",
        str(tasks),
        "--check",
        CHECK.removeprefix("check:"),
        "--arms",
        "adversarial",
        "--samples",
        "2",
        "--max-rounds",
        "2",
        "--baseline-samples",
        "3",
        "--limit",
        str(limit),
        "--seed",
        str(seed),
        "--out",
        str(out),
        *extra,
    ]


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        "".join(json.dumps({"id": t.task_id, "prompt": t.prompt, "reference": t.reference}) + "\n" for t in TASKS)
    )
    return path


def test_no_regression_is_said_and_recorded_with_each_arms_delta(
    tmp_path: Path, tasks: Path, no_ray: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert in_process(*compare(tmp_path / "old", tasks=tasks)) == 0
    old = tmp_path / "old" / "comparison.json"
    assert json.loads(old.read_text())["gate"] is None  # no --baseline, no gate
    capsys.readouterr()
    assert in_process(*compare(tmp_path / "new", "--baseline", str(old), "--fail-if-worse", tasks=tasks)) == 0
    err = capsys.readouterr().err
    assert f"redraft: gate: no arm regressed against {old}" in err.splitlines()
    assert "redraft: warning" not in err and "regression:" not in err
    gate = json.loads((tmp_path / "new" / "comparison.json").read_text())["gate"]
    assert (gate["baseline"], gate["verdict"], gate["basis"], gate["warnings"]) == (
        str(old),
        "no_regression",
        "feedback",
        [],
    )
    [delta] = gate["arms"]
    assert (delta["name"], delta["before"], delta["after"], delta["delta"], delta["regressed"]) == (
        "adversarial",
        1.0,
        1.0,
        0.0,
        False,
    )
    page = (tmp_path / "new" / "comparison.html").read_text()
    assert "<h2>Regression gate</h2>" in page and "<b>no arm regressed</b>" in page


def test_a_baseline_of_other_tasks_or_another_seed_is_warned_of(
    tmp_path: Path, tasks: Path, no_ray: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert in_process(*compare(tmp_path / "old", tasks=tasks, limit=4, seed=7)) == 0
    old = tmp_path / "old" / "comparison.json"
    capsys.readouterr()
    assert in_process(*compare(tmp_path / "new", "--baseline", str(old), tasks=tasks, limit=6, seed=11)) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("redraft: warning: ")]
    tail = ": so a difference may be the tasks', not the arms'"
    assert warned == [
        f"redraft: warning: the baseline comparison ran 4 tasks, this one 6{tail}",
        f"redraft: warning: the baseline comparison used --seed 7, this one --seed 11{tail}",
    ]
    recorded = json.loads((tmp_path / "new" / "comparison.json").read_text())["gate"]["warnings"]
    assert recorded == [line.removeprefix("redraft: warning: ") for line in warned]


def test_as_many_tasks_with_other_ids_are_warned_of_and_an_old_file_says_it_cannot_tell() -> None:
    from redraft.comparison._gate import differences, task_digest

    ours = task_digest(["t0", "t1"])
    assert task_digest(["t1", "t0"]) == ours
    seen = Earlier(arms=[EarlierArm("a", 0.5)], tasks=2, task_digest=task_digest(["t0", "t9"]), seed=0)
    [line] = differences(seen, 2, ours, 0)
    assert line.startswith("the baseline comparison ran other tasks (as many, other ids)")
    [old] = differences(Earlier(arms=[EarlierArm("a", 0.5)], tasks=2), 2, ours, 0)
    assert old.startswith("the baseline comparison does not record its tasks' ids or its seed")
