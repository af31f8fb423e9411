"""A comparison killed with SIGKILL mid-run resumes every lane: nothing that finished is redone.

The real command runs in a subprocess that joins the session's Ray cluster (see
`tests/test_resume_kill.py` for why its working directory is ``tests/``). Total
calls equal to an uninterrupted run's would be too strict here: a task in flight
when the driver dies is begun again. What must hold is that each lane's finished
lines survive byte for byte, the second invocation starts from them, and no task
is recorded twice.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_resume_kill import complete_lines, finish, redraft

pytestmark = pytest.mark.ray

TASKS = 20
LANES = ("arms/adversarial", "arms/self_refine", "baseline")
KILL_AFTER = 4
"""Finished tasks in the first arm's lane when the driver is killed."""


def command(address: str, out: Path) -> list[str]:
    args = "compare arithmetic --arms adversarial,self_refine --model scripted:tests.support.replies:steady_learner"
    args += f" --samples 2 --max-rounds 2 --baseline-samples 3 --limit {TASKS} --seed 3 --max-tasks-in-flight 6"
    return [sys.executable, "-m", "redraft.cli", *args.split(), "--address", address, "--out", str(out)]


def test_a_killed_comparison_resumes_each_lane_from_its_finished_tasks(ray_cluster: Any, tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    argv = command(ray_cluster.address, out)
    proc = redraft(argv)
    first = out / LANES[0] / "results.jsonl"
    while len(complete_lines(first)) < KILL_AFTER and proc.poll() is None:
        time.sleep(0.02)
    assert proc.poll() is None, f"the comparison ended before it could be killed: {proc.communicate()[1][-2000:]}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "comparison.json").exists()
    before = {lane: complete_lines(out / lane / "results.jsonl") for lane in LANES}
    assert len(before[LANES[0]]) >= KILL_AFTER
    assert sum(map(len, before.values())) < TASKS * len(LANES)  # something was left to do

    code, stderr = finish(redraft(argv))
    assert code == 0, stderr[-2000:]
    for lane, lines in before.items():
        after = (out / lane / "results.jsonl").read_bytes().splitlines(keepends=True)
        assert after[: len(lines)] == lines, lane  # what finished is kept byte for byte
        ids = [json.loads(line)["task_id"] for line in after]
        assert len(ids) == len(set(ids)) == TASKS, lane  # every task once, none redone
        if lines:  # the second invocation starts at the lane's done count
            assert f"resuming {lane}: {len(lines)} of {TASKS} tasks already done" in stderr
        else:
            assert not re.search(rf"resuming {re.escape(lane)}:", stderr)
    comparison = json.loads((out / "comparison.json").read_text())
    assert [a["tasks"] + a["ungraded"] for a in comparison["arms"]] == [TASKS, TASKS]


def test_ctrl_c_stops_every_lane_of_a_comparison_at_once_and_exits_130(ray_cluster: Any, tmp_path: Path) -> None:
    """Before, a comparison ignored SIGINT: its lanes' threads went on paying until they were done."""
    out = tmp_path / "cmp"
    proc = redraft(command(ray_cluster.address, out))
    first = out / LANES[0] / "results.jsonl"
    while len(complete_lines(first)) < KILL_AFTER and proc.poll() is None:
        time.sleep(0.02)
    assert proc.poll() is None, f"the comparison ended before it could be stopped: {proc.communicate()[1][-2000:]}"
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    code, stderr = finish(proc)
    assert time.monotonic() - sent < 30 and code == 130, stderr[-2000:]
    done = sum(len(complete_lines(out / lane / "results.jsonl")) for lane in LANES)
    assert done < TASKS * len(LANES) and not (out / "comparison.json").exists()
    assert stderr.strip().splitlines()[-1] == (
        f"redraft: interrupted: {done} of {TASKS * len(LANES)} tasks done over the comparison's lanes; "
        "rerun with the same --out to resume"
    )
    assert "Traceback" not in stderr and "threading" not in stderr
