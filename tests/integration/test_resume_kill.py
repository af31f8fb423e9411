"""A driver killed with SIGKILL at three points of a run resumes to exactly the run it would have been.

The real command runs in a subprocess that joins the session's Ray cluster, so
its actors die with it and no Ray of its own is left behind. Its working
directory is the repository's root: Ray puts the driver's working directory on its
workers' ``sys.path``, so the role actors import the scripted replies by name
(``tests.support.replies``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from redraft.protocols.messages import Result, iter_frames
from redraft.rundir import result_records, trace_bytes
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.ray

TASKS = 60
# Each scripted call blocks its actor for 20 ms: the run lasts seconds, so each kill lands mid-run.
KILLS_AFTER = (5, 20, 40)


def command(address: str, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "redraft.cli",
        "run",
        "arithmetic",
        "--model",
        "scripted:tests.support.replies:steady_learner",
        "--samples",
        "2",
        "--max-rounds",
        "2",
        "--limit",
        str(TASKS),
        "--seed",
        "3",
        "--max-tasks-in-flight",
        "4",
        "--address",
        address,
        "--out",
        str(out),
    ]


def redraft(args: list[str]) -> subprocess.Popen[str]:
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(args, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, stderr = proc.communicate(timeout=600)
    return proc.returncode, stderr


def complete_lines(path: Path) -> list[bytes]:
    if not path.exists():
        return []
    return [line for line in path.read_bytes().splitlines(keepends=True) if line.endswith(b"\n")]


def records(out: Path) -> dict[str, dict[str, Any]]:
    lines = result_records(out)
    by_id = {r["task_id"]: r for r in lines}
    assert len(by_id) == len(lines), "a task was recorded twice"
    return by_id


def without_wall_times(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k not in ("wall_s", "task_wall_s")}


def test_a_run_killed_three_times_resumes_exactly_once_to_the_uninterrupted_result(
    ray_cluster: Any, tmp_path: Path
) -> None:
    killed, reference = tmp_path / "killed", tmp_path / "reference"
    landed = 0
    for kill_after in KILLS_AFTER:
        proc = redraft(command(ray_cluster.address, killed))
        while len(complete_lines(killed / "results.jsonl")) < kill_after and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.communicate()[1][-2000:]}"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not (killed / "summary.json").exists()  # it died without a chance to finish
        landed = len(complete_lines(killed / "results.jsonl"))
        assert kill_after <= landed < TASKS

    code, stderr = finish(redraft(command(ray_cluster.address, killed)))
    assert code == 0, stderr[-2000:]
    assert f"resuming: {landed} of {TASKS} tasks already done" in stderr
    code, stderr = finish(redraft(command(ray_cluster.address, reference)))
    assert code == 0, stderr[-2000:]

    resumed, uninterrupted = records(killed), records(reference)
    assert sorted(resumed) == sorted(uninterrupted) and len(resumed) == TASKS
    for task_id, record in uninterrupted.items():
        for field in ("answer", "text", "score", "passed", "initial_passed", "rounds", "stop_reason", "usage"):
            assert resumed[task_id][field] == record[field], (task_id, field)
    # The trace holds each task's frames once: one Result per task, in the order of the results.
    trace = list(iter_frames(trace_bytes(killed)))  # every frame decodes
    lines = (killed / "results.jsonl").read_text().splitlines()
    assert [m.task_id for m in trace if isinstance(m, Result)] == [json.loads(line)["task_id"] for line in lines]
    summary = json.loads((killed / "summary.json").read_text())
    assert without_wall_times(summary) == without_wall_times(json.loads((reference / "summary.json").read_text()))
    # The run is a mix, so the equality above compares something: passes, failures, several rounds.
    assert 0 < summary["passed"] < TASKS and summary["mean_rounds"] > 1


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_a_signal_stops_the_run_at_once_says_so_and_exits_with_its_code(
    ray_cluster: Any, tmp_path: Path, signum: int, code: int
) -> None:
    """Before, Ctrl-C exited 0 with a stray Ray line, and SIGTERM dumped a C-level report and a traceback."""
    out = tmp_path / "stopped"
    proc = redraft(command(ray_cluster.address, out))
    while len(complete_lines(out / "results.jsonl")) < 5 and proc.poll() is None:
        time.sleep(0.02)
    assert proc.poll() is None, f"the run ended before it could be stopped: {proc.communicate()[1][-2000:]}"
    sent = time.monotonic()
    proc.send_signal(signum)
    returncode, stderr = finish(proc)
    assert time.monotonic() - sent < 30  # stops at once: no waiting for the tasks in flight
    assert returncode == code, stderr[-2000:]
    done = len(records(out))
    assert 5 <= done < TASKS
    assert stderr.strip().splitlines()[-1] == (
        f"redraft: interrupted: {done} of {TASKS} tasks done; rerun with the same --out to resume"
    )
    for noise in ("Traceback", "(raylet)", "*** SIGTERM", "threading"):
        assert noise not in stderr, stderr[-2000:]
    assert json.loads((out / "summary.json").read_text())["stopped_by"] == "interrupted"
    again, stderr = finish(redraft(command(ray_cluster.address, out)))
    assert again == 0, stderr[-2000:]
    assert f"resuming: {done} of {TASKS} tasks already done" in stderr and len(records(out)) == TASKS
