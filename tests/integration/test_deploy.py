"""Deploying as users do: a real multi-node Ray (``ray start``), ``redraft run --address``, ``ray job submit``.

The cluster is three raylets on this machine, started by the ``ray`` command with
token authentication and the dashboard (the job server lives there), exactly as
docs/guides/cluster.md says; see `real_cluster`. The model is
the scripted double, so the runs take seconds; what is tested is the deployment.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from redraft.protocols.messages import Draft, iter_frames
from redraft.rundir import result_records, trace_bytes
from tests.support import judges
from tests.support.paths import REPO_ROOT
from tests.support.real_cluster import VENV_BIN, RealCluster, ray_env

pytestmark = pytest.mark.cluster

TASKS = 6


@pytest.fixture(scope="module")
def cluster() -> Iterator[RealCluster]:
    started = RealCluster(workers=2)
    try:
        yield started.start()
    finally:
        started.stop()


def redraft(*args: str, cwd: Path = REPO_ROOT, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = ray_env() | {"PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "redraft.cli", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_redraft_run_joins_a_ray_started_with_ray_start_and_spreads_over_its_nodes(cluster: RealCluster) -> None:
    """Graded by a judge, so that the metrics below show its calls too."""
    out = cluster.temp_dir / "runs" / "via-address"
    rubric = cluster.temp_dir / "rubric.json"
    rubric.write_text(json.dumps(judges.RUBRIC))
    model = "scripted:tests.support.replies:steady_learner"
    judged = ("--judge", "scripted:tests.support.judges:faithful", "--rubric", str(rubric))
    done = redraft(
        "run", "arithmetic", "--model", model, "--limit", str(TASKS), "--address", cluster.address, "--out", str(out),
        *judged,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert len((out / "results.jsonl").read_text().splitlines()) == TASKS
    nodes = {m.node_id for m in iter_frames(trace_bytes(out)) if isinstance(m, Draft)}
    assert len(nodes) == 3  # one drafter per node, samples spread over them


def test_a_run_submitted_as_a_ray_job_lands_where_the_docs_say_and_logs_its_progress(cluster: RealCluster) -> None:
    out = cluster.temp_dir / "runs" / "via-job"
    # The documented command, run from the repository: the working directory travels to the cluster, and the
    # run directory is an absolute path on the node the job's driver runs on (the head).
    submit = subprocess.run(
        [
            *(str(VENV_BIN / "ray"), "job", "submit", "--address", cluster.dashboard, "--working-dir", ".", "--"),
            *("redraft", "run", "arithmetic", "--model", "scripted:tests.support.replies:steady_learner"),
            *("--limit", str(TASKS), "--address", "auto", "--out", str(out)),
        ],
        cwd=REPO_ROOT,
        env=ray_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert submit.returncode == 0, (submit.stdout + submit.stderr)[-3000:]
    job = re.search(r"Job '(raysubmit_\w+)' succeeded", submit.stdout + submit.stderr)
    assert job, submit.stdout[-2000:]
    records = result_records(out)
    assert len(records) == TASKS and json.loads((out / "summary.json").read_text())["tasks"] == TASKS
    logs = cluster.ray("job", "logs", "--address", cluster.dashboard, job[1])
    assert f"refining: {TASKS}/{TASKS} tasks" in logs.stdout, logs.stdout[-2000:]


def test_the_runs_figures_are_exported_as_ray_metrics(cluster: RealCluster) -> None:
    wanted = ("ray_redraft_tasks_done_total", "ray_redraft_model_calls_total", "ray_redraft_model_tokens_total")
    deadline = time.monotonic() + 60
    text = ""
    while time.monotonic() < deadline:
        text = urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_port}/metrics", timeout=10).read().decode()
        if all(name in text for name in wanted):
            break
        time.sleep(2)
    done = [line for line in text.splitlines() if line.startswith("ray_redraft_tasks_done_total{")]
    assert any('run="via-address"' in line and line.endswith(f" {TASKS}.0") for line in done), done
    calls = [line for line in text.splitlines() if line.startswith("ray_redraft_model_calls_total{")]
    assert any('role="drafter"' in line and 'model="scripted:steady_learner"' in line for line in calls), calls
    judged = [line for line in calls if 'role="judge"' in line and 'run="via-address"' in line]
    summary = json.loads((cluster.temp_dir / "runs" / "via-address" / "summary.json").read_text())
    made = summary["usage_by_role"]["judge"]["calls"]  # a task's final answer and round 0's leader, when they differ
    assert made >= TASKS and len(judged) == 1 and judged[0].endswith(f" {made}.0"), calls  # recorded by the driver


def test_joining_an_address_where_nothing_listens_fails_within_seconds_naming_it() -> None:
    started = time.monotonic()
    done = redraft("run", "arithmetic", "--limit", "1", "--address", "127.0.0.1:1", timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "cannot join the Ray cluster at 127.0.0.1:1" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert time.monotonic() - started < 30
