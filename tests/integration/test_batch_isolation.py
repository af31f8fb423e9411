"""Row-level isolation: a task's failure ends that task alone, with its cause; the run goes on.

Each way a task can fail happens for real, to its own task of one run:

| task | what goes wrong | recorded as |
|---|---|---|
| ``check`` | the scenario's check raises (a bug in the check) | ``error``, cause ``CheckError`` |
| ``garbage`` | the model answers nothing at all, every time | ``error``, cause ``ModelError`` |
| ``sandbox`` | the sandbox cannot start (a limit the kernel refuses) | ``error``, cause ``SandboxError`` |
| ``backend`` | every model call fails | ``error``, cause ``BackendError`` |
| ``segfault`` | the candidate crashes its own sandboxed interpreter | a failed check (evidence, not an error) |
| ``critic`` | the critic's reply is not a critique | the critique's ``error`` in the trace; the task goes on |

Roles look scenarios up by name in their own processes, so the run needs the
test scenario registered in every Ray worker. The driver is this file run as a
script: it joins the session's cluster with a job-level
``worker_process_setup_hook`` that registers the scenario in each worker.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from redraft import Plugins
from redraft.backends.base import ChatRequest
from redraft.backends.scripted import ScriptedSpec
from redraft.errors import BackendError
from redraft.protocols.messages import CheckResult, Critique, Result, Task, Verification, iter_frames
from redraft.rundir import result_records, trace_bytes
from redraft.sandbox import SandboxLimits, run_python
from redraft.scenarios import Scenario
from redraft.scenarios.builtin.arithmetic import extract_answer
from tests.support.paths import REPO_ROOT

KINDS = ("ok", "check", "garbage", "sandbox", "backend", "segfault", "critic")
ERRORS = {"check": "CheckError", "garbage": "ModelError", "sandbox": "SandboxError", "backend": "BackendError"}
# RLIMIT_NOFILE above the kernel's nr_open: setrlimit refuses it, for root too, so the sandbox cannot start.
UNSETTABLE = SandboxLimits(max_open_files=2**31)


class Faulty(Scenario):
    """One task per failure kind; the gold answer is 42."""

    name = "faulty"

    def tasks(self, *, seed: int) -> Iterator[Task]:
        for kind in KINDS:
            yield Task(task_id=kind, scenario=self.name, prompt=f"Task {kind}: what is 6 times 7?", reference={})

    def system_prompt(self) -> str:
        return "End with a line 'Answer: <integer>'."

    def answer(self, text: str) -> str | None:
        value = extract_answer(text)
        return None if value is None else str(value)

    def check(self, task: Task, text: str) -> list[CheckResult]:
        if task.task_id == "check":
            return [CheckResult(name="bug", passed=True, score=float(task.reference["gold"]))]  # KeyError
        if task.task_id in ("sandbox", "segfault"):
            limits = UNSETTABLE if task.task_id == "sandbox" else SandboxLimits(timeout_s=10.0)
            run = run_python(text, limits=limits)
            return [CheckResult(name="runs", passed=run.ok, score=float(run.ok), detail=str(run.kill_description))]
        ok = extract_answer(text) == 42
        return [CheckResult(name="answer", passed=ok, score=float(ok), detail="" if ok else "wrong")]


def reply(request: ChatRequest) -> str:
    user = request.messages[-1].content
    kind = re.findall(r"Task (\w+):", user)[0]
    if request.json_schema is not None:  # a critique
        return "}}{{ this is not a critique" if kind == "critic" else json.dumps({"issues": []})
    if kind == "garbage":
        return " \n\t "
    if kind == "backend":
        raise BackendError("upstream answered 503 on every attempt")
    if kind == "segfault":
        return "import ctypes\nctypes.string_at(0)"
    if kind == "critic" and "attempt 0" not in user:  # wrong in round 0, right once revised
        return "Answer: 41"
    return "Answer: 42"


def register() -> None:
    """Register `Faulty` in this process (the driver, and each worker through the setup hook)."""
    # Imported here, not bound at module level: a by-value copy of this function must reach the
    # worker's own registry, not a pickled copy of the driver's.
    from redraft.scenarios import scenario

    scenario("faulty")(Faulty)


def drive(address: str, out: str) -> None:
    """The driver: join the cluster with the setup hook, run every task, print the summary."""
    import ray

    from redraft import RunConfig, run

    register()
    ray.init(address=address, runtime_env={"worker_process_setup_hook": register}, log_to_driver=False)
    spec = ScriptedSpec(script=reply)
    config = RunConfig.build(scenario="faulty", samples=2, max_rounds=2, out=out, max_tasks_in_flight=len(KINDS))
    outcome = run(config, Plugins(backends={"drafter": spec, "critic": spec}))
    print(json.dumps({"tasks": outcome.summary.tasks}))


def test_each_failure_ends_its_own_task_with_its_cause_and_the_run_goes_on(ray_cluster: Any, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, __file__, ray_cluster.address, str(out)],
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHONPATH": str(REPO_ROOT)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    records = {r["task_id"]: r for r in result_records(out)}
    assert sorted(records) == sorted(KINDS)
    for kind, cause in ERRORS.items():
        assert records[kind]["stop_reason"] == "error", records[kind]
        assert records[kind]["error"].startswith(f"{cause}: "), records[kind]["error"]
        assert records[kind]["error_type"] == cause
    assert "the check of faulty raised KeyError" in records["check"]["error"]
    assert records["check"]["error_raised"] == "KeyError" and "Traceback" in records["check"]["traceback"]
    assert "returned an empty draft" in records["garbage"]["error"]
    assert "not allowed to raise maximum limit" in records["sandbox"]["error"]
    assert "503 on every attempt" in records["backend"]["error"]
    # Not errors: the crashing candidate failed its check; the task with the garbled critique went on and passed.
    assert records["segfault"]["stop_reason"] != "error" and not records["segfault"]["passed"]
    assert records["ok"]["passed"] and records["critic"]["passed"] and records["critic"]["rounds"] == 2
    trace = list(iter_frames(trace_bytes(out)))
    crashes = [v for v in trace if isinstance(v, Verification) and v.task_id == "segfault"]
    assert crashes and all(c.checks[0].detail == "SIGSEGV" for c in crashes)
    garbled = [c for c in trace if isinstance(c, Critique) and c.task_id == "critic"]
    assert garbled and all(c.error is not None and "not a valid critique" in c.error for c in garbled)
    assert sorted(m.task_id for m in trace if isinstance(m, Result)) == sorted(KINDS)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tasks"] == len(KINDS)
    assert summary["errors"] == {cause: 1 for cause in ERRORS.values()}
    assert summary["stop_reasons"]["error"] == len(ERRORS)


if __name__ == "__main__":
    drive(*sys.argv[1:3])
