"""The regression gate from the command line: ``--baseline OLD/comparison.json --fail-if-worse``.

Exit code 4 and one line per regressed arm (its name and by how much) when an arm
falls below the old comparison's rate by more than its interval allows; exit 0 on a
difference inside the noise. Rerunning a finished comparison's ``--out`` resumes
every lane at no cost, so the noise-level cases hold the same run against edited
copies of its own ``comparison.json``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from redraft.cli import main

TASKS = 40


def compare_args(out: Path, model: str, *extra: str) -> list[str]:
    return [
        "compare",
        "arithmetic",
        "--arms",
        "adversarial",
        "--model",
        f"scripted:tests.support.replies:{model}",
        "--samples",
        "1",
        "--max-rounds",
        "3",
        "--baseline-samples",
        "4",
        "--limit",
        str(TASKS),
        "--seed",
        "5",
        "--out",
        str(out),
        *extra,
    ]


def exit_code(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def edited(source: Path, into: Path, rate: float) -> Path:
    """A copy of a comparison.json whose arm had ``rate``."""
    data = json.loads(source.read_text())
    data["arms"][0]["pass_rate"] = rate
    into.write_text(json.dumps(data))
    return into


@pytest.fixture(scope="module")
def good(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("good") / "cmp"
    assert exit_code(compare_args(out, "coin")) == 0
    return out


def regression_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("redraft: regression: ")]


@pytest.mark.ray
def test_a_worse_model_fails_the_gate_with_exit_4_naming_the_arm_and_the_drop(
    good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = json.loads((good / "comparison.json").read_text())["arms"][0]
    capsys.readouterr()
    code = exit_code(
        compare_args(tmp_path / "worse", "worse_coin", "--baseline", str(good / "comparison.json"), "--fail-if-worse")
    )
    new = json.loads((tmp_path / "worse" / "comparison.json").read_text())["arms"][0]
    [line] = regression_lines(capsys.readouterr().err)
    assert code == 4
    assert old["pass_rate"] - new["pass_rate"] > 0.3  # the planted regression is a large one
    assert line.startswith("redraft: regression: arm adversarial: graded pass rate ")
    assert f"{new['pass_rate']:.1%}" in line and f"by {old['pass_rate'] - new['pass_rate']:.1%}" in line


@pytest.mark.ray
def test_the_gate_passes_a_noise_level_difference_and_fails_one_beyond_the_interval(
    good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arm = json.loads((good / "comparison.json").read_text())["arms"][0]
    low, high = arm["ci"]["low"], arm["ci"]["high"]
    assert high - low < 0.4  # an interval that can be left
    inside = edited(good / "comparison.json", tmp_path / "inside.json", (arm["pass_rate"] + high) / 2)
    same = good / "comparison.json"
    beyond = edited(good / "comparison.json", tmp_path / "beyond.json", min(1.0, high + 0.05))
    for old, expected in ((inside, 0), (same, 0), (beyond, 4)):
        capsys.readouterr()
        # The same --out: every lane resumes with nothing left to do, and the figures are the same.
        code = exit_code(compare_args(good, "coin", "--baseline", str(old), "--fail-if-worse"))
        err = capsys.readouterr().err
        assert code == expected, (old.name, err[-2000:])
        assert len(regression_lines(err)) == (expected == 4)
        assert (f"redraft: gate: no arm regressed against {old}" in err.splitlines()) == (expected == 0)
        for lane in ("arms/adversarial", "baseline"):
            assert f"resuming {lane}: {TASKS} of {TASKS} tasks already done" in err
    assert json.loads((good / "comparison.json").read_text())["arms"][0] == arm


@pytest.mark.ray
def test_without_fail_if_worse_a_regression_is_said_but_exits_0(
    good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arm = json.loads((good / "comparison.json").read_text())["arms"][0]
    beyond = edited(good / "comparison.json", tmp_path / "beyond.json", min(1.0, arm["ci"]["high"] + 0.05))
    capsys.readouterr()
    assert exit_code(compare_args(good, "coin", "--baseline", str(beyond))) == 0
    assert len(regression_lines(capsys.readouterr().err)) == 1


def test_fail_if_worse_without_a_baseline_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(compare_args(tmp_path / "x", "coin", "--fail-if-worse")) == 2
    err = capsys.readouterr().err
    assert re.search(r"redraft: error: --fail-if-worse needs --baseline", err)
    assert not (tmp_path / "x").exists()
