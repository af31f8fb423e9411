"""What the engine itself costs, as ratios against baselines measured in the same run.

1. Framework time per model call: the same tasks through the arbiter in-process
   (roles as plain objects, frames still encoded and validated) and on Ray
   (every frame crossing an actor boundary), with a zero-latency scripted model.
   Baseline: a bare `await backend.complete()` loop with the same replies.
2. Parallel sampling: K samples with a simulated 200 ms model latency. Baseline:
   the ideal round time (one latency, as if the K calls overlapped perfectly).

Run: `make bench` (or `.venv/bin/python benchmarks/bench_engine.py`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from itertools import islice
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from redraft import Plugins, RunConfig, run
from redraft.backends.base import ChatRequest
from redraft.backends.scripted import ScriptedSpec
from redraft.engine._refine import local_roles
from redraft.engine.arbiter import Arbiter
from redraft.engine.resolution import arbiter_settings, resolve_run
from redraft.protocols.messages import ChatMessage
from redraft.scenarios import get_scenario
from tests.support.replies import LateLearner

TASKS = 200


def bare_calls(spec: ScriptedSpec, calls: int, prompts: list[str]) -> float:
    backend = spec.create()

    async def go() -> None:
        for i in range(calls):
            await backend.complete(ChatRequest(messages=[ChatMessage(role="user", content=prompts[i % len(prompts)])]))

    started = time.perf_counter()
    asyncio.run(go())
    return time.perf_counter() - started


def in_process(config: RunConfig, spec: ScriptedSpec) -> float:
    run = resolve_run(config, backends={"drafter": spec, "critic": spec})
    arbiter = Arbiter(local_roles(run.cast), arbiter_settings(config))
    tasks = list(islice(get_scenario("arithmetic").tasks(seed=0), TASKS))

    async def go() -> int:
        results = await asyncio.gather(*(arbiter.run(t) for t in tasks))
        return sum(len(trace) for trace in results)

    started = time.perf_counter()
    asyncio.run(go())
    return time.perf_counter() - started


def spec_calls(config: RunConfig) -> int:
    # Drafts: K per round; rounds: the learner fixes at round 1, so 2 rounds; critiques: 2 in round 0.
    return TASKS * (config.experiment.samples * 2 + 2)


def main() -> None:
    import ray

    tasks = list(islice(get_scenario("arithmetic").tasks(seed=0), TASKS))
    spec = ScriptedSpec(script=LateLearner(fix_at=1))
    config = RunConfig.build(samples=2, max_rounds=3, limit=TASKS, max_tasks_in_flight=64)
    calls = spec_calls(config)

    bare = bare_calls(spec, calls, [t.prompt for t in tasks])
    local_s = in_process(config, spec)

    from tests.support import replies

    ray.cloudpickle.register_pickle_by_value(replies)  # test code: by value, whatever sys.path a worker has
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    with TemporaryDirectory() as tmp:
        warm = RunConfig.build(samples=2, max_rounds=3, limit=5, out=f"{tmp}/warm")
        run(warm, Plugins(backends={"drafter": spec, "critic": spec}))  # actors and workers started once
        started = time.perf_counter()
        outcome = run(
            RunConfig.build(samples=2, max_rounds=3, limit=TASKS, out=f"{tmp}/run", max_tasks_in_flight=64),
            Plugins(backends={"drafter": spec, "critic": spec}),
        )
        ray_s = time.perf_counter() - started
        assert outcome.summary.usage.calls == calls, (outcome.summary.usage.calls, calls)

        delay, k = 0.2, 4
        slow = ScriptedSpec(script=LateLearner(never=True), delay_s=delay)
        run(
            RunConfig.build(strategy="self_consistency", samples=k, limit=1, out=f"{tmp}/slow"),
            Plugins(backends={"drafter": slow, "critic": slow}),
        )
        # The arbiter's own wall time for the task: one round of K drafts and their checks.
        round_s = json.loads(Path(f"{tmp}/slow/results.jsonl").read_text())["wall_s"]

    rows = {
        "model calls": calls,
        "bare backend, us/call": 1e6 * bare / calls,
        "in-process engine, us/call": 1e6 * local_s / calls,
        "ray engine, us/call": 1e6 * ray_s / calls,
        "ray engine, tasks/s": TASKS / ray_s,
        "ratio in-process / bare": local_s / bare,
        "ratio ray / in-process": ray_s / local_s,
        f"K={k} round at {delay * 1000:.0f} ms latency, s": round_s,
        "ratio round / ideal (1 latency)": round_s / delay,
        "ratio round / sequential (K latencies)": round_s / (k * delay),
    }
    width = max(map(len, rows))
    for name, value in rows.items():
        print(f"{name:<{width}}  {value:,.3f}" if isinstance(value, float) else f"{name:<{width}}  {value:,}")
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in rows.items()}))


if __name__ == "__main__":
    main()
