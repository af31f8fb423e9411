"""The newer strategies on Ray actors: a whole run with reflections, verification questions and stages.

Each strategy's exact messages and decisions, in-process: tests/unit/strategies/test_strategies.py.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

import pytest

from redraft import Plugins
from redraft.backends.scripted import ScriptedSpec
from redraft.protocols.messages import Draft, Reflection, Verification, iter_frames
from redraft.rundir import result_records, trace_bytes
from redraft.scenarios import get_scenario
from tests.support.replies import Tutor

TASKS = list(islice(get_scenario("arithmetic").tasks(seed=0), 2))
K = 2


@pytest.mark.ray
@pytest.mark.parametrize(
    ("strategy", "patch"), [("verifier_only", False), ("cove", False), ("stepwise", True)], ids=str
)
def test_new_strategies_run_on_ray_actors(ray_cluster: Any, tmp_path: Any, strategy: str, patch: bool) -> None:

    from redraft import RunConfig, run

    spec = ScriptedSpec(script=Tutor.for_tasks(TASKS, fix_at=1))
    out = tmp_path / "run"
    config = RunConfig.build(strategy=strategy, samples=K, max_rounds=3, patch=patch, limit=len(TASKS), out=str(out))
    outcome = run(config, Plugins(backends={"drafter": spec, "critic": spec}))
    assert (outcome.summary.tasks, outcome.summary.passed, outcome.summary.initial_passed) == (2, 2, 0)
    trace = list(iter_frames(trace_bytes(out)))
    extra = {"verifier_only": Reflection, "cove": Verification, "stepwise": Draft}[strategy]
    if strategy == "cove":
        assert [m for m in trace if isinstance(m, extra) and m.questions]
    elif strategy == "stepwise":
        assert {m.stage for m in trace if isinstance(m, Draft)} == {"outline", "draft", "polish"}
        assert [m for m in trace if isinstance(m, Draft) and m.edits_applied == 1]  # round 1 patched
    else:
        assert len([m for m in trace if isinstance(m, extra)]) == 2  # one reflection per task
    records = result_records(out)
    role = {"verifier_only": "drafter", "cove": "verifier", "stepwise": "drafter"}[strategy]
    assert all(r["usage_by_role"][role]["calls"] > 0 for r in records)
