"""Plan steps per second across many tasks at once: ``plan_execute`` on pipeline cases, steps spread over the
verifier actors of 1 and 2 simulated nodes, against the same tasks one at a time in one process.

The drafter is scripted (`tests.support.plan_scripts.Discovering`: a 3-step plan, revised to 4 steps where a
case's dates come in several formats), so the time is the loop's and the sandbox's, not a model's. Each node has
one CPU, and a verifier actor whose checks run programs reserves it and runs one step at a time, so two nodes
run two tasks' steps at once. Each figure comes with how busy the machine's CPU was meanwhile (``/proc/stat``):
where it is near 100 %, the machine, not the spread, bounds the rate. A step's round trip (files in, run, table
out) is measured alone by ``bench_sandbox_files.py``.

Run: ``python benchmarks/bench_plan_steps.py`` (``--tasks N``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from datetime import date
from itertools import islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support

from redraft import Plugins, RunConfig, run
from redraft.backends.scripted import ScriptedSpec
from redraft.protocols.messages import Message, VerifyRequest
from redraft.rundir import KnownFrame, RunReader
from redraft.scenarios import get_scenario
from tests.support import plan_scripts
from tests.support.harness import run_task


def busy() -> tuple[float, float]:
    """The machine's (busy, total) CPU time so far, from ``/proc/stat`` (zeros where there is none)."""
    try:
        fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def used(before: tuple[float, float]) -> float:
    """The share of the machine's CPU busy since ``before`` (0 where it cannot be read)."""
    after = busy()
    return (after[0] - before[0]) / (after[1] - before[1]) if after[1] > before[1] else 0.0


def steps_in(trace: list[Message]) -> int:
    return sum(1 for m in trace if isinstance(m, VerifyRequest) and m.step is not None)


def in_one_process(tasks: int) -> tuple[int, float]:
    """Every task in turn, in this process: (steps run, seconds)."""
    started = time.perf_counter()
    steps = 0
    for task in islice(get_scenario("pipeline").tasks(seed=0), tasks):
        trace = run_task(task, plan_scripts.Discovering(), strategy="plan_execute", samples=1, max_rounds=1)
        steps += steps_in(trace)
    return steps, time.perf_counter() - started


def on_ray(nodes: int, tasks: int) -> tuple[int, float]:
    """The same tasks as one run on a cluster of ``nodes`` one-CPU nodes: (steps run, seconds of the run)."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(plan_scripts)  # the workers need not import the tests package
    try:
        with tempfile.TemporaryDirectory() as folder:
            drafter = ScriptedSpec(script=plan_scripts.discovering)
            config = RunConfig.build(
                scenario="pipeline", strategy="plan_execute", max_rounds=1, limit=tasks, out=f"{folder}/run"
            )
            started = time.perf_counter()
            outcome = run(config, Plugins(backends={"drafter": drafter, "critic": drafter}))
            elapsed = time.perf_counter() - started
            assert outcome.summary.graded_passed == tasks, outcome.summary
            reader = RunReader(Path(folder) / "run")
            frames = [f for e in reader.entries() for f in reader.frames(e)]
            steps = steps_in([f.message for f in frames if isinstance(f, KnownFrame)])
        return steps, elapsed
    finally:
        ray.shutdown()
        cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=80)
    args = parser.parse_args()
    asyncio.set_event_loop(None)
    rates: dict[str, float] = {}
    cpu: dict[str, float] = {}
    start = busy()
    steps, seconds = in_one_process(args.tasks)
    rates["one process, one task at a time"] = steps / seconds
    cpu["one process, one task at a time"] = used(start)
    for nodes in (1, 2):
        start = busy()
        ray_steps, ray_seconds = on_ray(nodes, args.tasks)
        cpu[f"Ray, {nodes} node(s)"] = used(start)
        assert ray_steps == steps, (ray_steps, steps)  # the same work, however it is spread
        rates[f"Ray, {nodes} node(s)"] = ray_steps / ray_seconds
    base = rates["one process, one task at a time"]
    print(f"# {date.today()}, {platform.machine()}, {os.cpu_count()} cores: plan_execute on {args.tasks} pipeline "
          f"cases, {steps} steps, scripted drafter")  # fmt: skip
    for name, rate in rates.items():
        print(f"{name:34} {rate:5.2f} steps/s ({rate / base:.2f}x), the machine's CPU {cpu[name]:.0%} busy")
    print(json.dumps({"steps": steps, "steps_per_s": rates, "cpu_busy": cpu}))


if __name__ == "__main__":
    main()
