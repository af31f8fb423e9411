"""The `redraft` command: listings, one-line errors with exit code 2, and a scripted run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from redraft.cli import main
from tests.support.paths import README, REPO_ROOT


def redraft(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "redraft.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


def test_scenarios_lists_one_name_per_line() -> None:
    done = redraft("scenarios")
    assert done.returncode == 0
    # A parametrized family is listed by its pattern.
    assert done.stdout.splitlines() == [
        "arithmetic",
        "check:MODULE:FUNCTION",
        "constrained_writing",
        "humaneval",
        "json_extract",
        "reasoning_gym:NAME",
        "sql",
    ]


def test_strategies_lists_names_first() -> None:
    done = redraft("strategies")
    assert done.returncode == 0
    names = done.stdout.split("\n\n")[0].splitlines()
    assert names == [
        "adversarial",
        "best_of_n",
        "cove",
        "debate",
        "none",
        "self_consistency",
        "self_refine",
        "stepwise",
        "verifier_only",
    ]
    assert "separate critic" in done.stdout and "two critics" in done.stdout.lower()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "sudoku"],
            "unknown scenario 'sudoku' (known: arithmetic, check:MODULE:FUNCTION, constrained_writing, humaneval, "
            "json_extract, reasoning_gym:NAME, sql)",
        ),
        (["run", "arithmetic", "--strategy", "vibes"], "unknown strategy 'vibes'"),
        (["run", "arithmetic", "--model", "gpt:4"], "unknown backend spec 'gpt:4'"),
        (
            ["run", "arithmetic", "--critic", "local:/no/such/model.gguf"],
            "GGUF model file not found: /no/such/model.gguf",
        ),
        (["run", "arithmetic", "--drafter", "local:pyproject.toml"], "needs a .gguf file"),
        (["run", "arithmetic", "--samples", "0"], "--samples must be in [1, 1,000], got 0"),
        (["run", "arithmetic", "--samples", "many"], "Invalid value for '--samples'"),
        (["run", "arithmetic", "--threshold", "1.5"], "--threshold must be in [0, 1], got 1.5"),
        (["run", "arithmetic", "--max-rounds", "0"], "--max-rounds must be in [1, 1,000], got 0"),
        (["run", "arithmetic", "--limit", "-3"], "--limit must be in [1, 1,000,000], got -3"),
        (
            ["run", "arithmetic", "--max-tokens", "1" + "0" * 23],
            "--max-tokens must be in [1, 1,000,000], got 100" + ",000" * 7,
        ),
        (["run", "arithmetic", "--budget-usd", "nan"], "--budget-usd must be a finite number, got nan"),
        (["run", "arithmetic", "--task-budget-usd", "inf"], "--task-budget-usd must be a finite number, got inf"),
        (["run", "arithmetic", "--budget-usd", "-1"], "--budget-usd must be in (0, 1,000,000,000], got -1"),
        (["run", "arithmetic", "--frobnicate"], "No such option: --frobnicate"),
        (["run", "arithmetic", "--model", "scripted:nope"], "scripted backend needs 'scripted:MODULE:FUNC'"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(args: list[str], message: str, tmp_path: Path) -> None:
    done = redraft(*args, "--out", str(tmp_path / "run"), cwd=REPO_ROOT)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("redraft: error: ")
    assert message in lines[0]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()  # nothing was started or written


@pytest.mark.ray
def test_run_writes_the_run_directory_and_prints_the_table(
    ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = [
        "run",
        "arithmetic",
        "--model",
        "scripted:tests.support.replies:always_seven",
        "--limit",
        "4",
        "--samples",
        "2",
        "--out",
        str(out),
    ]
    main(argv)  # returns on success; only errors exit
    captured = capsys.readouterr()
    printed = captured.out
    # Not a terminal here: progress comes as plain lines, the last one at completion.
    assert re.match(r"refining: 4/4 tasks, pass \d+%, [\d.]+ tasks/s, ETA 0 s$", captured.err.strip().splitlines()[-1])
    assert "graded pass rate, round 0" in printed and "feedback pass rate, refined" in printed
    assert "stop reasons" in printed and "ORACLE" not in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["drafter"] == "scripted:tests.support.replies:always_seven"
    assert len(manifest["fingerprint"]) == 16 and "ray" in manifest["versions"]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 4
    required = {"task_id", "answer", "score", "passed", "initial_score", "initial_passed", "rounds", "stop_reason"}
    for record in records:
        assert required <= set(record)
        assert record["answer"] == "7"
        assert {"input_tokens", "output_tokens", "calls", "cached_tokens", "cost_usd", "cache_hits"} == set(
            record["usage"]
        )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tasks"] == 4
    assert summary["usage"]["calls"] == sum(r["usage"]["calls"] for r in records)
    # Gold answers differ from 7 except by chance: the summary agrees with the records.
    assert summary["passed"] == sum(r["passed"] for r in records)


def test_readme_shows_the_real_help() -> None:
    env = os.environ | {"COLUMNS": "80", "TERM": "dumb", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "redraft.cli", "--help"], capture_output=True, text=True, env=env, timeout=60
    )
    real = [line.rstrip() for line in done.stdout.strip().splitlines()]
    readme = README.read_text()
    block = readme.split("$ redraft --help\n", 1)[1].split("```", 1)[0]
    shown = [line.rstrip() for line in block.strip().splitlines()]
    # The README shows the command as `redraft`; run as a module it is `python -m redraft.cli`.
    assert [line.replace("python -m redraft.cli", "redraft") for line in real] == shown


@pytest.mark.ray
def test_a_spent_run_budget_stops_dispatch_with_exit_code_3(
    ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = [
        "run",
        "arithmetic",
        "--model",
        "scripted:tests.support.replies:always_seven",
        "--limit",
        "20",
        "--samples",
        "1",
        "--max-in-flight",
        "1",
        "--budget-calls",
        "5",
        "--out",
        str(out),
    ]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 3
    assert "redraft: stopped: run budget: " in capsys.readouterr().err
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    calls = [r["usage"]["calls"] for r in records]
    # One task in flight at a time: dispatch stops at the first task that finds 5 calls spent.
    assert sum(calls[:-1]) < 5 <= sum(calls) and len(records) < 20
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_by"].startswith("run budget: ") and summary["tasks"] == len(records)


def test_run_without_address_starts_its_own_ray_despite_a_dead_one_on_record(tmp_path: Path) -> None:
    # A leftover address (here: nothing listens on it) is what a plain ray.init() would try to join.
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT), "RAY_ADDRESS": "127.0.0.1:9"}
    out = tmp_path / "run"
    args = [
        "run",
        "arithmetic",
        "--model",
        "scripted:tests.support.replies:always_seven",
        "--strategy",
        "none",
        "--limit",
        "2",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "redraft.cli", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
