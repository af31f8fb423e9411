"""Batch refinement at scale: throughput, framework time per model call and the driver's memory.

Each size (1k, 10k, 100k tasks by default) is a real `redraft.batch.run` on Ray,
run directory and all, with a scripted model at zero latency, in a fresh driver
process joined to one local Ray cluster, so each size's memory high-water mark
is its own. Tasks are generated lazily (two-step arithmetic problems, as many as
asked for), and the model works each problem out from its prompt: wrong in round
0, right once revised, so every task makes the same calls (K=2 drafts and 2
critiques in round 0, K=2 drafts in round 1: 6 model calls, 4 checks).

Figures, with the baselines they are compared with (all measured in this run):

- tasks/s while dispatching (first to last result; actor start-up excluded), its
  ratio at each size to the 1k run, and within each run the rate of its last
  tenth over its first tenth: the rate must not fall as the run grows;
- framework time per model call: the driver's wall time over the model calls,
  against a bare ``await backend.complete()`` loop with the same replies (the
  cost of everything that is not the model: actors, messages, checks, writing);
- the driver's peak memory: its resident set high-water mark (``VmHWM``), and
  its ratio to the 1k run's (flat means within 20 %). RSS, not tracemalloc:
  tracemalloc sees only the Python heap, while Ray's core worker (object
  references, task specs) lives in C++ memory of the same process.

Run: ``make bench`` (all three sizes; about 20 minutes on 2 cores), or
``.venv/bin/python benchmarks/bench_batch.py 1000 10000`` for chosen sizes.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from redraft import Plugins, RunHooks
from redraft.backends.base import ChatRequest
from redraft.backends.scripted import ScriptedSpec
from redraft.protocols.messages import ChatMessage, Result, Task
from redraft.scenarios.builtin.arithmetic import Arithmetic, _problem

SIZES = (1_000, 10_000, 100_000)
SAMPLES, ROUNDS, IN_FLIGHT = 2, 3, 64
CALLS_PER_TASK = SAMPLES * 2 + 2


class EndlessArithmetic(Arithmetic):
    """The arithmetic scenario's problems, as many as asked for, generated one at a time."""

    name = "arithmetic-endless"

    def tasks(self, *, seed: int) -> Iterator[Task]:
        rng = random.Random(seed)
        i = 0
        while True:
            prompt, answer = _problem(rng)
            yield Task(task_id=f"bench-{i:07d}", scenario=self.name, prompt=prompt, reference={"answer": answer})
            i += 1


def register() -> None:
    """Register the scenario in this process: the driver, and each Ray worker (as the job's setup hook)."""
    from redraft.scenarios import scenario  # the worker's own registry, not a pickled copy of ours

    scenario(EndlessArithmetic.name)(EndlessArithmetic)


def learner(request: ChatRequest) -> str:
    """Works the problem out from the prompt: wrong in round 0, right once revised; critiques find one issue."""
    if request.json_schema is not None:
        return '{"issues": [{"severity": "critical", "quote": "Answer", "reason": "off", "fix": "redo"}]}'
    user = request.messages[-1].content
    prompt = user.split("\n\n")[0]
    start = int(re.search(r"has (\d+)", prompt)[1])  # type: ignore[index]
    gold = start + sum(int(n) for n in re.findall(r"gets (\d+) more", prompt))
    gold -= sum(int(n) for n in re.findall(r"gives away (\d+)", prompt))
    revised = "- attempt " in user
    return f"Step by step.\nAnswer: {gold if revised else gold + 1}"


def peak_rss_mb() -> float:
    """This process's resident set high-water mark (VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(size: int, address: str, out: str) -> None:
    """One size in this (fresh) driver process; prints one JSON line of figures."""
    import ray

    from redraft import RunConfig, run

    register()
    ray.init(address=address, runtime_env={"worker_process_setup_hook": register}, log_to_driver=False)
    spec = ScriptedSpec(script=learner)
    # Sample (results, seconds, RSS) every 1 % of the run: neither the rate nor memory may drift with it.
    samples: list[tuple[int, float, float]] = []
    step = max(size // 100, 1)
    count = 0
    first = last = 0.0

    def hook(result: Result) -> None:
        nonlocal count, first, last
        count += 1
        last = time.perf_counter()
        if count == 1:
            first = last
            samples.append((1, 0.0, rss_mb()))
        if count % step == 0:
            samples.append((count, last - first, rss_mb()))

    started = time.perf_counter()
    outcome = run(
        RunConfig.build(
            scenario=EndlessArithmetic.name,
            samples=SAMPLES,
            max_rounds=ROUNDS,
            limit=size,
            out=out,
            max_tasks_in_flight=IN_FLIGHT,
        ),
        Plugins(backends={"drafter": spec, "critic": spec}),
        RunHooks(on_result=hook),
    )
    wall = time.perf_counter() - started
    s = outcome.summary
    assert s.tasks == size and s.passed == size and s.usage.calls == size * CALLS_PER_TASK, s
    dispatch_s = last - first
    tenth = len(samples) // 10
    (n0, t0, _), (n1, t1, _) = samples[0], samples[tenth]
    (n8, t8, _), (n9, t9, _) = samples[-tenth - 1], samples[-1]
    print(
        json.dumps(
            {
                "tasks": size,
                "calls": s.usage.calls,
                "wall_s": wall,
                "dispatch_s": dispatch_s,
                "tasks_per_s": (size - 1) / dispatch_s,
                "tasks_per_s_first_tenth": (n1 - n0) / (t1 - t0),
                "tasks_per_s_last_tenth": (n9 - n8) / (t9 - t8),
                "peak_rss_mb": peak_rss_mb(),
                "rss_at_first_result_mb": samples[0][2],
                "rss_at_end_mb": samples[-1][2],
                "rss_samples": samples,
            }
        )
    )


def bare_us_per_call(calls: int) -> float:
    """The baseline: the scripted model alone, awaited in a loop with the same kinds of requests."""
    backend = ScriptedSpec(script=learner).create()
    problems = EndlessArithmetic().tasks(seed=0)
    prompts = [next(problems).prompt for _ in range(100)]
    requests = [ChatRequest(messages=[ChatMessage(role="user", content=p)]) for p in prompts]

    async def go() -> None:
        for i in range(calls):
            await backend.complete(requests[i % len(requests)])

    started = time.perf_counter()
    asyncio.run(go())
    return 1e6 * (time.perf_counter() - started) / calls


def main(sizes: list[int]) -> None:
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    address = ray.get_runtime_context().gcs_address
    bare = bare_us_per_call(60_000)
    rows: dict[int, dict[str, Any]] = {}
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="redraft-bench-batch-") as tmp:
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(size), address, f"{tmp}/run"],
                capture_output=True,
                text=True,
                check=False,
            )
        if done.returncode != 0:
            raise SystemExit(f"size {size} failed:\n{done.stderr[-3000:]}")
        rows[size] = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{size:>7,} tasks done: {json.dumps({k: v for k, v in rows[size].items() if k != 'rss_samples'})}",
            flush=True,
        )
    base = rows[sizes[0]]
    print()
    print(f"bare backend: {bare:.1f} us/call (baseline of the per-call figures)")
    header = (
        f"{'tasks':>8} {'tasks/s':>8} {'x base':>7} {'last/first tenth':>16} {'us/call':>8} {'x bare':>7} "
        f"{'peak RSS MB':>12} {'x base':>7}"
    )
    print(header)
    for size, row in rows.items():
        us_call = 1e6 * row["dispatch_s"] / (row["calls"] * (size - 1) / size)
        drift = row["tasks_per_s_last_tenth"] / row["tasks_per_s_first_tenth"]
        print(
            f"{size:>8,} {row['tasks_per_s']:>8.1f} {row['tasks_per_s'] / base['tasks_per_s']:>7.2f} {drift:>16.2f} "
            f"{us_call:>8.0f} {us_call / bare:>7.0f} {row['peak_rss_mb']:>12.1f} "
            f"{row['peak_rss_mb'] / base['peak_rss_mb']:>7.3f}"
        )
    print(json.dumps({"bare_us_per_call": bare, "runs": rows}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        main([int(a) for a in sys.argv[1:]] or list(SIZES))
