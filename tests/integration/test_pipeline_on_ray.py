"""The pipeline scenario on Ray: a task's files travel in its frame to the verifier and grader actors, whose
sandboxes run the program over them; the naive program's quirks show in the grade, not in the feedback alone.
A plan (``plan_execute``) cut by its arbiter's death resumes from its last verified step."""

from __future__ import annotations

import hashlib
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from redraft import Plugins, RunConfig, run
from redraft.backends.scripted import ScriptedSpec
from redraft.engine.prompts import fenced
from tests.support.chaos import in_thread, role_pids, wait_for
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.ray

REFERENCE = (REPO_ROOT / "tests" / "support" / "pipeline_reference.py").read_text()
SOLVED = "```python\n" + REFERENCE.replace('p.name != "output.csv"', 'p.name not in ("output.csv", "main.py")') + "```"


def test_a_pipeline_run_executes_each_program_in_the_sandbox_and_grades_its_table(
    ray_cluster: Any, tmp_path: Path
) -> None:
    solved = ScriptedSpec(script=lambda request: SOLVED)
    config = RunConfig.build(
        scenario="pipeline", strategy="verifier_only", samples=1, max_rounds=1, limit=4, out=str(tmp_path / "run")
    )
    summary = run(config, Plugins(backends={"drafter": solved, "critic": solved})).summary
    assert (summary.tasks, summary.passed, summary.graded, summary.graded_passed) == (4, 4, 4, 4)
    naive = ScriptedSpec(script=lambda request: SOLVED.replace("solve(inputs)", "naive(inputs)"))
    worse = run(
        config.replace(out=str(tmp_path / "naive")), Plugins(backends={"drafter": naive, "critic": naive})
    ).summary
    assert worse.graded == 4 and worse.graded_passed < 4


def logged_discovering(log: Path, delay_s: float) -> Any:
    """`Discovering`, each call logged to ``log`` as a line (the task's hash, the ask) and slowed by ``delay_s``."""
    from tests.support.plan_scripts import Discovering, ask_of, step_output

    script = Discovering()

    def reply(request: Any) -> str:
        task = hashlib.blake2b(fenced(request.messages[-1].content)[0].encode(), digest_size=4).hexdigest()
        kind = ask_of(request)
        ask = f"step {step_output(request)}" if kind == "step" else kind
        with log.open("a") as out:
            out.write(f"{task} {ask}\n")
        time.sleep(delay_s)
        return script(request)

    return reply


def test_a_plan_cut_by_its_arbiters_death_resumes_from_its_last_verified_step(ray_cluster: Any, tmp_path: Path) -> None:
    import ray

    from tests.support import plan_scripts

    ray.cloudpickle.register_pickle_by_value(plan_scripts)  # the workers need not import the tests package
    log = tmp_path / "asks.log"
    log.touch()
    drafter = ScriptedSpec(script=logged_discovering(log, delay_s=1.0))
    out = str(tmp_path / "run")
    config = RunConfig.build(scenario="pipeline", strategy="plan_execute", max_rounds=1, limit=2, out=out)
    thread, box = in_thread(lambda: run(config, Plugins(backends={"drafter": drafter, "critic": drafter})))
    # Kill every arbiter once some task's first step is verified (its decision is being asked).
    assert wait_for(lambda: " decide" in log.read_text() or not thread.is_alive(), 120)
    time.sleep(1.5)  # the verified step's checkpoint reaches the driver
    killed = list(role_pids(ray_cluster, ("ArbiterActor",)))
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    thread.join(timeout=300)
    assert not thread.is_alive() and "error" not in box, box
    summary = box["value"].summary
    assert killed and summary.retried_tasks >= 1
    assert (summary.tasks, summary.graded, summary.graded_passed) == (2, 2, 2)
    asks = Counter(log.read_text().splitlines())
    # A redone task replayed its plan and its verified steps: none was asked for twice.
    assert [line for line, n in asks.items() if n > 1 and ("plan" in line or "inventory" in line)] == []
    assert sum(1 for line in asks if line.endswith(" plan")) == 2
