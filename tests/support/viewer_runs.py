"""Run directories for the viewer's tests: finished ones (`tests.support.report_runs.make_run`), a comparison of
two such lanes, and a run still being written, a task at a time, through the real writer (`RunStore`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

from redraft import RunConfig
from redraft.engine._refine import refine_trace
from redraft.engine.grader import Grader
from redraft.engine.resolution import arbiter_settings
from redraft.protocols.messages import Result, Task, decode_as, encode
from redraft.rundir import RunStore
from tests.support.harness import scripted_arbiter
from tests.support.report_runs import PLANS, MixedReplies, make_run, prompt_of
from tests.support.resolved import manifest_for


def make_comparison(root: Path) -> Path:
    """A comparison's directory: two arms (four rounds and two), its comparison.json and .html."""
    make_run(root / "arms" / "deep")
    make_run(root / "arms" / "shallow", max_rounds=2, strategy="self_refine")
    (root / "comparison.json").write_text(json.dumps({"scenario": "arithmetic"}))
    (root / "comparison.html").write_text("<!DOCTYPE html><html><body><h1>the comparison's own page</h1></body></html>")
    return root


class LiveRun:
    """A run directory held open by its writer (so it reads as running), to which a test adds tasks."""

    def __init__(self, root: Path, total: int) -> None:
        config = RunConfig.build(scenario="arithmetic", samples=2, max_rounds=3, patience=2, limit=total, out=str(root))
        ticks = itertools.count()
        self.arbiter = scripted_arbiter(
            MixedReplies(), arbiter_settings(config), model="gpt-4o-mini", clock=lambda: float(next(ticks))
        )
        self.grader = Grader("arithmetic")
        self.store = RunStore.open(root, manifest_for(config, root.name))
        self.added = 0
        self.plans = itertools.cycle([(t, p) for t, p in PLANS.items() if not p.explode])

    def add(self, n: int = 1) -> None:
        """Refine and write ``n`` more tasks."""
        for _ in range(n):
            task_id, plan = next(self.plans)
            task = Task(
                task_id=f"{task_id}#{self.added}",
                scenario="arithmetic",
                prompt=prompt_of(task_id, plan),
                gold={"answer": plan.gold},
            )
            trace = asyncio.run(refine_trace(self.arbiter, self.grader, task))
            self.store.append([encode(m) for m in trace], decode_as(encode(trace[-1]), Result))
            self.added += 1

    def finish(self) -> None:
        self.store.finish(wall_s=1.0)
