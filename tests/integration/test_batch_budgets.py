"""Time limits: a task timeout cuts an overrunning round; a run's time budget is a deadline.

Both keep what finished: a cut task ends with stop reason ``budget`` and the
best candidate of its finished rounds, and the run still accounts for it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from redraft import Plugins, RunConfig, run
from redraft.backends.base import Backend, ChatRequest, Completion
from redraft.backends.scripted import ScriptedBackend
from redraft.cli import EXIT_BUDGET, main
from redraft.protocols.messages import Decision, Draft, DraftRequest, Result, iter_frames
from redraft.rundir import result_records, trace_bytes
from tests.support.replies import CRITIQUE, STUCK_TASK, is_critique, round_of

pytestmark = pytest.mark.ray


@pytest.fixture(autouse=True)
def _specs_travel_by_value(ray_cluster: Any) -> None:
    import ray

    ray.cloudpickle.register_pickle_by_value(
        sys.modules[__name__]
    )  # test code: by value, whatever sys.path a worker has


def wrong_at_once(request: ChatRequest) -> str:
    return json.dumps(CRITIQUE) if is_critique(request) else "Attempt.\nAnswer: 0"  # gold answers are >= 1


@dataclass(frozen=True)
class HangsOnRevision:
    """A model that answers round 0 at once and never answers a revision (it hangs)."""

    spec: str = "scripted"

    def create(self) -> Backend:
        class Hanging(ScriptedBackend):
            async def complete(self, request: ChatRequest) -> Completion:
                if round_of(request) >= 1:
                    await asyncio.sleep(3600)
                return await super().complete(request)

        return Hanging(wrong_at_once)


def test_a_task_timeout_cuts_an_overrunning_round_and_keeps_the_best_so_far(ray_cluster: Any, tmp_path: Path) -> None:
    out = tmp_path / "run"
    spec = HangsOnRevision()
    config = RunConfig.build(samples=1, max_rounds=3, patience=3, limit=2, task_timeout=5.0, out=str(out))
    outcome = run(config, Plugins(backends={"drafter": spec, "critic": spec}))
    assert outcome.summary.tasks == 2 and outcome.summary.stop_reasons == {"budget": 2}
    assert outcome.summary.stopped_by is None  # a task's own limit says nothing about the run
    trace = list(iter_frames(trace_bytes(out)))
    for record in result_records(out):
        task = [m for m in trace if _task_id(m) == record["task_id"]]
        # Round 0 finished; round 1's draft was asked for and never came.
        assert [m.round for m in task if isinstance(m, DraftRequest)] == [0, 1]
        assert [m.round for m in task if isinstance(m, Draft)] == [0]
        stop = [m for m in task if isinstance(m, Decision)][-1]
        assert (stop.reason, stop.detail, stop.best_round) == ("budget", "task timeout after 5 s", 0)
        assert isinstance(task[-1], Result)
        # The best so far is round 0's candidate, with what it cost (one draft, one critique).
        assert record["rounds"] == 1 and record["text"] == "Attempt.\nAnswer: 0" and record["answer"] == "0"
        assert record["usage"]["calls"] == 2 and record["stop_reason"] == "budget" and record["error"] is None


def _task_id(message: Any) -> str:
    return str(message.task.task_id if hasattr(message, "task") else message.task_id)


def test_a_spent_time_budget_stops_dispatch_cuts_tasks_in_flight_and_exits_3(
    ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    model = "scripted:tests.support.replies:slow_seven_one_stuck"
    argv = ["run", "arithmetic", "--model", model, "--strategy", "none"]
    argv += ["--limit", "40", "--max-tasks-in-flight", "2", "--budget-seconds", "12", "--out", str(out)]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == EXIT_BUDGET
    assert "redraft: stopped: run budget: " in capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_by"].startswith("run budget: ") and " of 12 seconds spent" in summary["stopped_by"]
    records = result_records(out)
    assert summary["tasks"] == len(records) < 40
    # Each call blocks its actor for a second, and the first task's for longer than the run, so tasks were in
    # flight at the deadline: they stopped there (no round finished), were recorded, and the run says how many.
    trace = list(iter_frames(trace_bytes(out)))
    cut = {m.task_id for m in trace if isinstance(m, Decision) and m.limit == "run_deadline"}
    assert f"arithmetic-{STUCK_TASK:04d}" in cut
    assert f"; {len(cut)} task(s) in flight stopped at the deadline" in summary["stopped_by"]
    for record in records:
        if record["task_id"] in cut:
            assert record["stop_reason"] == "budget" and record["rounds"] == 0
            assert record["stop_limit"] == "run_deadline" and record["error_type"] is None
        else:
            # One round each (strategy none); the answer 7 is right for the few tasks whose gold is 7.
            assert record["stop_reason"] in ("max_rounds", "threshold") and record["answer"] == "7"
            assert record["rounds"] == 1
