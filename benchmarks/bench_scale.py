"""The run directory at scale: bytes a task, and what each reader costs as a run grows.

1. **The store and its readers** at 10k, 100k and 1M tasks. The frames of the reference
   workload (arithmetic, K=2, two rounds, a scripted model that is wrong in round 0 and
   right in round 1) are made once by the engine in this process for `BASE` distinct
   tasks, then written through the real writer (`RunStore.append`) as many times as the
   size needs, each copy with its own task id and its digits permuted, so that no two
   tasks' texts are alike. Then, each in a process of its own (wall time and peak memory
   as the kernel counts them): opening the directory to resume (`RunStore.open`: with the
   writer's verified prefix, then without it, as a run written before it), `redraft
   report`, `redraft export --format parquet`, `redraft trace` of the middle task, and
   the floor every command stands on (Python starting and importing redraft's CLI).
2. **A comparison's analysis** (`redraft.comparison._analysis`) over 8 arms of the
   `--analysis` sizes each and a baseline of 8 samples a task, from synthetic task
   figures shaped as the reference workload's: its baselines' curves, arms' figures, and
   every paired test.
3. **The engine end to end** at the `--engine` sizes, with the same scripted model on a
   local Ray: tasks/s, the driver's peak memory and bytes a task.

Every figure is printed with the ratio of each size to the smallest.

Run: `.venv/bin/python benchmarks/bench_scale.py` (sizes: `--sizes 10000 100000 1000000 --analysis 10000 100000
--engine 10000 100000`; `--keep DIR` keeps the store's run directories and reads them again on the next run).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import msgspec

from redraft import Plugins, RunConfig
from redraft.backends.scripted import ScriptedSpec
from redraft.engine._refine import local_roles
from redraft.engine.arbiter import Arbiter
from redraft.engine.resolution import arbiter_settings, resolve_run
from redraft.protocols.messages import Result, decode_as, encode
from redraft.rundir import RunStore, fingerprint
from redraft.scenarios import get_scenario
from redraft.scenarios.builtin import arithmetic
from tests.support.replies import LateLearner

BASE = 500
"""Distinct tasks the engine refines; the store's runs copy them."""
REFERENCE = {"samples": 2, "max_rounds": 2}


def reference_tasks(n: int) -> tuple[list[Any], ScriptedSpec]:
    tasks = list(itertools.islice(get_scenario("arithmetic").tasks(seed=0), n))
    return tasks, reference_model(n)


def reference_model(n: int) -> ScriptedSpec:
    """The scripted model of the reference workload, for a run of ``n`` tasks. It answers from each prompt alone,
    so nothing in this process grows with ``n`` but the engine's own state (the driver's memory is the engine's)."""
    arithmetic.SIZE = max(arithmetic.SIZE, n)  # its problems are drawn one by one: as many as a size needs
    return ScriptedSpec(script=LateLearner(fix_at=1))


def base_frames() -> list[list[Any]]:
    """Each base task's frames as MessagePack builtins (its `Result` last), made by the engine in this process."""
    tasks, spec = reference_tasks(BASE)
    config = RunConfig.build(**REFERENCE, limit=BASE)
    run = resolve_run(config, backends={"drafter": spec, "critic": spec})
    arbiter = Arbiter(local_roles(run.cast), arbiter_settings(config))

    async def go() -> list[list[Any]]:
        traces = await asyncio.gather(*(arbiter.run(t) for t in tasks))
        return [[msgspec.msgpack.decode(encode(m)) for m in trace] for trace in traces]

    return asyncio.run(go())


def _permuted(value: Any, digits: dict[int, int], task_id: str) -> Any:
    if isinstance(value, str):
        return value.translate(digits)
    if isinstance(value, dict):
        return {k: task_id if k == "task_id" else _permuted(v, digits, task_id) for k, v in value.items()}
    if isinstance(value, list):
        return [_permuted(v, digits, task_id) for v in value]
    return value


def copies(base: list[list[Any]], n: int) -> Iterator[tuple[list[bytes], Result]]:
    """``n`` tasks' frames and results: the base tasks again and again, each copy's id and digits its own."""
    rng = random.Random(0)
    for i in range(n):
        order = list("0123456789")
        rng.shuffle(order)
        digits = {ord(str(d)): ord(c) for d, c in enumerate(order)}
        frames = [msgspec.msgpack.encode(_permuted(f, digits, f"task-{i:07d}")) for f in base[i % len(base)]]
        yield frames, decode_as(frames[-1], Result)


def write_run(root: Path, base: list[list[Any]], n: int) -> float:
    """Write an ``n``-task run directory through the real writer; seconds taken by the writer alone."""
    config = RunConfig.build(**REFERENCE, limit=n)
    manifest = {"config": msgspec.to_builtins(config), "fingerprint": fingerprint({"n": n}), "wire_version": 1}
    store = RunStore.open(root, manifest)
    writing = 0.0
    for frames, result in copies(base, n):
        started = time.perf_counter()
        store.append(frames, result)
        writing += time.perf_counter() - started
    store.finish(writing)
    return writing


def measured(command: list[str]) -> tuple[float, float]:
    """Run ``command``; its wall seconds and peak memory in MB, as the kernel counts it.

    The command is started by /usr/bin/time (a small process), not forked from this one: Linux counts a child's
    peak memory from the memory of the process it was forked from, and this one holds the base frames."""
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *command], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()}")
    return wall, int(done.stderr.decode().split()[-1]) / 1024


RUN_FILES = ("manifest.json", "results.jsonl", "trace.msgpack", "trace.dict", "tasks.index", "verified.json")
"""What the writer writes (not the report or exports the readers leave beside it), summary.json aside."""

RESUME = """
import json, sys
from pathlib import Path
from redraft.rundir import RunStore
root = Path(sys.argv[1])
store = RunStore.open(root, json.loads((root / "manifest.json").read_text()))
assert len(store.done) == int(sys.argv[2]), len(store.done)
"""


def readers(root: Path, n: int) -> dict[str, tuple[float, float]]:
    redraft = [sys.executable, "-m", "redraft.cli"]
    figures = {"resume-open": measured([sys.executable, "-c", RESUME, str(root), str(n)])}
    (root / "verified.json").unlink(
        missing_ok=True
    )  # as a run written before the checkpoint: every task verified (and it is made)
    figures["resume-open, verifying all"] = measured([sys.executable, "-c", RESUME, str(root), str(n)])
    return figures | {
        "report": measured([*redraft, "report", str(root)]),
        "export parquet": measured([*redraft, "export", str(root), "--format", "parquet"]),
        "trace one task": measured([*redraft, "trace", str(root), f"task-{n // 2:07d}"]),
        "python and redraft's import": measured([sys.executable, "-c", "import redraft.cli, redraft.views.trace"]),
    }


def store_figures(
    sizes: list[int], base: Callable[[], list[list[Any]]], keep: Path | None
) -> dict[int, dict[str, float]]:
    figures: dict[int, dict[str, float]] = {}
    for n in sizes:
        with TemporaryDirectory() as tmp:
            root = (keep or Path(tmp)) / f"run-{n}"
            writing = _written(root, base, n)
            on_disk = sum((root / name).stat().st_size for name in RUN_FILES if (root / name).exists())
            row = {"bytes a task": on_disk / n, "writer, us a task": 1e6 * writing / n}
            for name, (wall, peak) in readers(root, n).items():
                row[f"{name}, s"], row[f"{name}, peak MB"] = wall, peak
            figures[n] = row
            print(f"  {n:>9,} tasks: " + ", ".join(f"{k} {v:,.3g}" for k, v in row.items()), flush=True)
    return figures


def _written(root: Path, base: Callable[[], list[list[Any]]], n: int) -> float:
    """Write the run at ``root`` (a kept one, whole, is read again: its writer's time is in its manifest)."""
    manifest = root / "manifest.json"
    if (root / "summary.json").exists():
        return float(json.loads(manifest.read_text())["wall_s"])
    if root.exists():
        shutil.rmtree(root)
    return write_run(root, base(), n)


def engine_figures(sizes: list[int]) -> dict[int, dict[str, float]]:
    import ray

    from redraft import run
    from tests.support import replies

    ray.cloudpickle.register_pickle_by_value(replies)  # test code: by value, whatever sys.path a worker has
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    figures: dict[int, dict[str, float]] = {}
    with TemporaryDirectory() as tmp:
        for n in sizes:
            spec = reference_model(n)
            started = time.perf_counter()
            outcome = run(
                RunConfig.build(**REFERENCE, limit=n, out=f"{tmp}/run-{n}", max_tasks_in_flight=64),
                Plugins(backends={"drafter": spec, "critic": spec}),
            )
            wall = time.perf_counter() - started
            assert outcome.summary.tasks == n, outcome.summary.tasks
            on_disk = sum(p.stat().st_size for p in Path(f"{tmp}/run-{n}").iterdir() if p.is_file())
            figures[n] = {
                "tasks/s": n / wall,
                "driver peak MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "driver MB at the end": rss_now_mb(),
                "bytes a task": on_disk / n,
            }
            print(f"  {n:>9,} tasks: " + ", ".join(f"{k} {v:,.3g}" for k, v in figures[n].items()), flush=True)
    ray.shutdown()
    return figures


def rss_now_mb() -> float:
    """This process's resident memory now (Linux; elsewhere its peak): the peak is over every size run before."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


ARMS = 8
BASELINE_SAMPLES = 8


def analysis_figures(sizes: list[int]) -> dict[int, dict[str, float]]:
    """A comparison's analysis (`redraft.comparison._analysis`) over `ARMS` arms of ``n`` tasks each and a baseline
    of `BASELINE_SAMPLES` samples a task, from synthetic task figures (what reading the lanes gives it)."""
    from redraft.comparison._analysis import against_baseline, arm_summary, between, curve, per_task_pass
    from redraft.comparison._lane_figures import Behaviour, TaskFigures

    figures: dict[int, dict[str, float]] = {}
    for n in sizes:
        rng = random.Random(n)
        arms = {
            f"arm{a}": [
                [
                    TaskFigures(
                        task_id=f"task-{i:07d}",
                        graded_pass=rng.random() < 0.5 + a / 40,
                        passed=rng.random() < 0.6,
                        initial_graded_pass=rng.random() < 0.4,
                        calls=rng.randrange(3, 9),
                        tokens=rng.randrange(500, 3000),
                        usd=rng.random() / 100,
                        wall_s=rng.random(),
                        by_round=[rng.random() < 0.4, rng.random() < 0.5 + a / 40],
                    )
                    for i in range(n)
                ]
            ]
            for a in range(ARMS)
        }
        samples = {f"task-{i:07d}": _samples(rng, i) for i in range(n)}
        row: dict[str, float] = {}
        started = time.perf_counter()
        curves = [curve(name, samples, (1.0, 400.0, 0.001), 1.0) for name in ("best_of_n", "self_consistency")]
        row["baseline curves, s"] = time.perf_counter() - started
        started = time.perf_counter()
        summaries = [arm_summary(name, runs, Behaviour(), oracle=False) for name, runs in arms.items()]
        per_task = {name: per_task_pass(runs) for name, runs in arms.items()}
        row["arm figures, s"] = time.perf_counter() - started
        started = time.perf_counter()
        for arm in summaries:
            for c in curves:
                against_baseline(arm, per_task[arm.name], c, samples, "calls")
        row["vs baselines, s"] = time.perf_counter() - started
        started = time.perf_counter()
        for a, b in itertools.combinations(summaries, 2):
            between(a.name, per_task[a.name], b.name, per_task[b.name])
        row["between arms, s"] = time.perf_counter() - started
        row["analysis in all, s"] = sum(row.values())
        figures[n] = row
        print(f"  {ARMS} arms x {n:>9,} tasks: " + ", ".join(f"{k} {v:,.3g}" for k, v in row.items()), flush=True)
    return figures


def _samples(rng: random.Random, i: int) -> list[Any]:
    """A baseline task's samples as the reference workload's: each right (score 1, passing, the task's answer) or
    wrong (score 0, one of three wrong answers)."""
    from redraft.stats import Sample

    right = [rng.random() < 0.5 for _ in range(BASELINE_SAMPLES)]
    return [Sample(score=float(r), passed=r, answer=str(i) if r else f"{i}-{rng.randrange(3)}") for r in right]


def table(title: str, figures: dict[int, dict[str, float]]) -> None:
    sizes = sorted(figures)
    smallest = figures[sizes[0]]
    print(f"\n{title}")
    header = f"{'':<28}" + "".join(f"{n:>14,}" for n in sizes) + "".join(f"{f'x {n:,}':>14}" for n in sizes[1:])
    print(header)
    for key in smallest:
        values = "".join(f"{figures[n][key]:>14,.3f}" for n in sizes)
        ratios = "".join(f"{figures[n][key] / smallest[key]:>14.2f}" for n in sizes[1:] if smallest[key])
        print(f"{key:<28}{values}{ratios}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--engine", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--analysis", type=int, nargs="*", default=[10_000, 100_000], help="tasks an arm")
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep the store's run directories in this folder, and read them again on the next run",
    )
    args = parser.parse_args()
    if args.sizes:
        print(f"The store and its readers ({BASE} base tasks refined in this process, then copied):", flush=True)
        table(
            "The store and its readers (ratios: each size / the smallest)",
            store_figures(args.sizes, functools.cache(base_frames), args.keep),
        )
    if args.analysis:
        print(f"\nA comparison's analysis ({ARMS} arms, synthetic task figures):", flush=True)
        table("A comparison's analysis (ratios: each size / the smallest)", analysis_figures(args.analysis))
    if args.engine:
        print("\nThe engine end to end (scripted model, local Ray):", flush=True)
        table("The engine (ratios: each size / the smallest)", engine_figures(args.engine))


if __name__ == "__main__":
    main()
