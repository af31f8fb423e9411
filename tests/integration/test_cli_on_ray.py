"""The `redraft` command's runs: on the session's Ray, within a run budget, and on a Ray of its own."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from redraft.cli import main
from redraft.rundir import result_records
from tests.support.chaos import lines, started_at, under, wait_for
from tests.support.paths import REPO_ROOT


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
    assert re.match(
        r"refining: 4/4 tasks, graded pass \d+%, feedback pass \d+%, [\d.]+ tasks/s, ETA 0 s$",
        captured.err.strip().splitlines()[-1],
    )
    assert "graded pass rate, round 0" in printed and "feedback pass rate, refined" in printed
    assert "stop reasons" in printed and "ORACLE" not in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["drafter"] == "scripted:tests.support.replies:always_seven"
    assert len(manifest["fingerprint"]) == 16 and "ray" in manifest["versions"]
    records = result_records(out)
    assert len(records) == 4
    required = {"task_id", "answer", "score", "passed", "initial_score", "initial_passed", "rounds", "stop_reason"}
    for record in records:
        assert required <= set(record)
        assert record["answer"] == "7"
        assert {
            "input_tokens",
            "output_tokens",
            "calls",
            "cached_tokens",
            "cost_usd",
            "cache_hits",
            "batch_calls",
            "saved_calls",
            "saved_usd",
            "cache_write_tokens",
            "prompt_cache_saved_usd",
        } == set(record["usage"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tasks"] == 4
    assert summary["usage"]["calls"] == sum(r["usage"]["calls"] for r in records)
    # Gold answers differ from 7 except by chance: the summary agrees with the records.
    assert summary["passed"] == sum(r["passed"] for r in records)


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
    records = result_records(out)
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
    # A quiet terminal: Ray's own start-up warnings go to the run's ray.log, not between redraft's lines.
    assert "Token authentication" not in done.stderr and "WARNING" not in done.stderr, done.stderr
    assert "Token authentication is enabled" in (out / "ray.log").read_text()
    # The end says what to do next (and, with no embedded model in the run, nothing about it).
    assert f"next: redraft report {out}" in done.stdout and "SmolLM2" not in done.stdout


@pytest.mark.parametrize("ending", ["killed", "finished"])
def test_the_processes_of_a_run_on_its_own_ray_go_when_it_ends(ending: str, tmp_path: Path) -> None:
    # Ray's agents outlived a killed driver by a minute (they wait 60 s on a dead GCS before they exit).
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    out = tmp_path / "run"
    model = "slow_seven" if ending == "killed" else "always_seven"  # a second a call: killed mid-run
    args = ["run", "arithmetic", "--model", f"scripted:tests.support.replies:{model}", "--strategy", "none"]
    argv = [sys.executable, "-m", "redraft.cli", *args, "--limit", "20", "--out", str(out)]
    driver = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: dict[int, tuple[int | None, str]] = {}
    while driver.poll() is None and (ending == "finished" or lines(out / "results.jsonl") == 0):
        now = under(driver.pid).items()
        seen |= {pid: (seen.get(pid, (started_at(pid), ""))[0], name) for pid, name in now if name}
        time.sleep(0.05)
    if ending == "killed":
        assert driver.poll() is None, "the run ended before it could be killed"
        driver.send_signal(signal.SIGKILL)
    assert driver.wait() == (-signal.SIGKILL if ending == "killed" else 0)
    names = " ".join(name for _, name in seen.values())
    assert "raylet" in names and "DashboardAgent" in names and "ArbiterActor" in names  # the run's Ray was seen

    def left() -> list[str]:
        return [name for pid, (start, name) in seen.items() if start is not None and started_at(pid) == start]

    assert wait_for(lambda: not left(), 30), left()  # generous: they go within a second


def test_a_local_ray_whose_first_start_runs_out_of_time_is_started_again_with_nothing_left_over(
    tmp_path: Path,
) -> None:
    # Ray's wait for the GCS's port at 0 s: the first start fails as on a loaded machine; the second waits longer.
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT), "RAY_gcs_server_port_wait_time_s": "0"}
    out = tmp_path / "run"
    args = ["run", "arithmetic", "--model", "scripted:tests.support.replies:always_seven", "--strategy", "none"]
    argv = [sys.executable, "-m", "redraft.cli", *args, "--limit", "2", "--out", str(out)]
    driver = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    gcs_at_once = 0
    while driver.poll() is None:
        gcs_at_once = max(gcs_at_once, sum("gcs_server" in name for name in under(driver.pid).values()))
        time.sleep(0.02)
    _, stderr = driver.communicate()
    assert driver.returncode == 0, stderr
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    assert "redraft: Ray did not start (RuntimeError: Timed out waiting for file" in stderr  # the first start
    assert gcs_at_once == 1  # the first start's GCS was killed before the second one started
    assert "Traceback" not in stderr
