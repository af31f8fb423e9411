"""Slow is never failed: the embedded model held to a tenth of a core (as a machine at load 20 holds it) makes
a task slower, not failed, though each call takes far longer than the role-call deadline; the same deadline
applied to the model's calls, as it was, fails the task (the control that shows the test can fail). No response
cache: the control must pay for its call as the first did."""

from __future__ import annotations

import json

import pytest

from tests.support.throttled import throttled_run

pytestmark = pytest.mark.model

SCRIPT = """
import asyncio, json, sys
import msgspec
from redraft.config import RunConfig
from redraft.engine._refine import local_roles, refine_trace
from redraft.engine.arbiter import Arbiter
from redraft.engine.grader import Grader
from redraft.engine.resolution import resolve_run
from redraft.protocols.messages import Result, Task

paced = {PACED}
config = RunConfig.build(
    scenario="arithmetic", strategy="self_refine", samples=1, max_rounds=1, max_tokens=16, cache=False
)
run = resolve_run(config)
setup, settings = run.setup, run.settings
paced_roles = settings.paced_roles if paced else frozenset()
settings = msgspec.structs.replace(settings, call_deadline_s=1.0, paced_roles=paced_roles)
roles = local_roles(run.cast, settings)
task = Task(task_id="slow", scenario="arithmetic", prompt="Ann has 9 pens. Then Ann gets 4 more. How many now?",
            gold={{"answer": 13}})
try:
    trace = asyncio.run(refine_trace(Arbiter(roles, settings), Grader(setup.scenario), task))
    result = trace[-1]
    print(json.dumps({{"paced": sorted(settings.paced_roles), "error": result.error, "calls": result.usage.calls,
                      "latency": max(getattr(m, "latency_s", 0.0) for m in trace)}}))
except Exception as exc:
    print(json.dumps({{"paced": sorted(settings.paced_roles), "raised": type(exc).__name__, "why": str(exc)[:200]}}))
"""


def outcome(paced: bool) -> dict[str, object]:
    done = throttled_run(SCRIPT.format(PACED=paced), share=0.1)
    if done is None:
        pytest.skip("no writable cgroup cpu controller here to throttle the model with")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_model_slowed_to_a_tenth_of_a_core_makes_the_task_slower_not_failed() -> None:
    slow = outcome(paced=True)
    assert slow["paced"] == ["critic", "drafter", "self_critic"] and slow.get("raised") is None, slow
    assert slow["error"] is None and slow["calls"] == 1, slow  # one draft, through
    cut = outcome(paced=False)  # the control: a fixed deadline on the same slow calls
    assert cut.get("raised") == "InfrastructureError" and "deadline" in str(cut["why"]), cut
