"""A tune's and a comparison's wall time with one fleet of role actors for the whole command, against a fleet per
run, on a local Ray, and whether their results are the same.

The world is ``bench_tune.py``'s: sums in a task file, checked and graded by its functions; the drafter and the
critic are ``fake_http_model.py``'s server (its own process, ``--latency`` a request, 0.4 s by default; response
cache off). The tune: ``--iterations`` proposals from ``bench_tune.py``'s proposer (``--proposer-latency``, 0.2 s
here), one draft per task (``best_of_n``, one sample, one round). The comparison: ``best_of_n`` and
``self_refine`` (2 samples, 2 rounds) and the sampling baseline of 3 samples over ``--tasks`` sums.

Each command runs twice in the same process and on the same local Ray, in turns: with ``REDRAFT_FLEET=per-run``
(every evaluation and every lane starts and stops actors of its own, as before the shared fleet) and with the
shared fleet (started once at the command's first run, stopped at its end). Printed: each command's wall time,
its ratio shared against per-run, the evaluations' or lanes' median start-up (from an evaluation opening, or the
comparison's call, to its first task done, one model call included), the actors the command started, and whether
every task's result (its text, score, grade, rounds and calls) is the same as per run. Nothing is written into
the repository.

Run: ``python benchmarks/bench_shared_fleet.py`` (``--tasks N``, ``--iterations N``, ``--latency S``,
``--repeats N``: turns of both modes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import fake_http_model
from bench_tune import SEED, Proposer, check, grade, write_tasks

from redraft import (
    CompareHooks,
    CompareSettings,
    Plugins,
    RunConfig,
    TuneHooks,
    TunePlugins,
    TuneSettings,
    compare,
    tune,
)
from redraft.rundir.reader import RunReader

MODES = ("per-run", "shared")


class Clock:
    """Each run's (start, first task done), by its label; a run not said to start started at ``opened``."""

    def __init__(self, opened: float = 0.0) -> None:
        self.spans: dict[str, list[float]] = {}
        self.opened = opened
        self._lock = threading.Lock()

    def on_start(self, label: str, total: int, done: int) -> None:
        with self._lock:
            self.spans[label] = [time.monotonic(), 0.0]

    def on_result(self, label: str, result: Any) -> None:
        with self._lock:
            span = self.spans.setdefault(label, [self.opened, 0.0])
            span[1] = span[1] or time.monotonic()

    def start_up(self) -> float:
        return statistics.median([end - start for start, end in self.spans.values() if end] or [0.0])


def actors_started() -> int:
    """Actors this process's Ray job has started so far, dead ones included; -1 where Ray cannot say."""
    try:
        import ray
        import ray._private.state

        return len(ray._private.state.actors(job_id=ray.JobID.from_hex(ray.get_runtime_context().get_job_id())))
    except Exception:
        return -1


def results_of(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every task's result under ``root`` (each run directory in it), by run and task: what must not change."""
    found = {}
    for results in sorted(root.rglob("results.jsonl")):
        for r in RunReader(results.parent).finished():
            key = f"{results.parent.relative_to(root)}/{r.task_id}"
            found[key] = (r.text, r.score, r.grade, r.rounds, r.stop_reason, r.usage.calls)
    return found


def one_tune(spec: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    config = RunConfig.build(
        tasks=str(write_tasks(folder / "tasks.jsonl", args.tasks)), strategy="best_of_n", samples=1,
        max_rounds=1, drafter=spec, critic=spec, cache=False, seed=SEED, out=str(folder / "tune"),
    )  # fmt: skip
    settings = TuneSettings(sections=["draft_system", "draft_task"], minibatch=4, max_proposals=args.iterations)
    clock, before = Clock(), actors_started()
    started = time.monotonic()
    plugins = TunePlugins(check=check, grade=grade, proposer=Proposer(args.proposer_latency))
    tune(config, settings, plugins, TuneHooks(on_start=clock.on_start, on_result=clock.on_result))
    wall = time.monotonic() - started
    return {"wall_s": wall, "start_up_s": clock.start_up(), "runs": len(clock.spans),
            "actors": actors_started() - before, "results": results_of(folder / "tune")}  # fmt: skip


def one_compare(spec: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    config = RunConfig.build(
        tasks=str(write_tasks(folder / "tasks.jsonl", args.tasks)), samples=2, max_rounds=2, drafter=spec,
        critic=spec, cache=False, seed=SEED, out=str(folder / "compare"),
    )  # fmt: skip
    before, started = actors_started(), time.monotonic()
    clock = Clock(opened=started)  # a lane's start-up: from the comparison's call to its first task done
    chosen = CompareSettings(["best_of_n", "self_refine"], baseline_samples=3)
    compare(config, chosen, Plugins(check=check, grade=grade), CompareHooks(on_result=clock.on_result))
    wall = time.monotonic() - started
    return {"wall_s": wall, "start_up_s": clock.start_up(), "runs": 3, "actors": actors_started() - before,
            "results": results_of(folder / "compare")}  # fmt: skip


def turn(command: str, mode: str, spec: str, args: argparse.Namespace) -> dict[str, Any]:
    os.environ["REDRAFT_FLEET"] = mode
    with tempfile.TemporaryDirectory() as folder:
        row = (one_tune if command == "tune" else one_compare)(spec, args, Path(folder))
    print(f"({command}, {mode}: {row['wall_s']:.1f} s)", file=sys.stderr)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20, help="sums: the tune splits them 0.4 / 0.3 / 0.3")
    parser.add_argument("--iterations", type=int, default=2, help="the tune's proposals")
    parser.add_argument("--latency", type=float, default=0.4, help="the server's seconds per request")
    parser.add_argument("--proposer-latency", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=1, help="turns of both modes, per command")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with fake_http_model.serve_in_background(args.latency) as (url, _):  # forked before Ray starts anything
        spec = f"openai-compatible:fake@{url}/v1"
        turn("tune", "per-run", spec, args)  # warm: Ray starts, and the first worker processes with it
        for _ in range(args.repeats):
            for command in ("tune", "compare"):
                for mode in MODES:
                    rows.setdefault((command, mode), []).append(turn(command, mode, spec, args))
    print(f"# {date.today()}, {platform.machine()}, {os.cpu_count()} cores, load average {load:.1f} at the start: "
          f"{args.tasks} sums, a tune of {args.iterations} proposals, a comparison of 2 arms and the baseline, "
          f"{args.latency * 1000:.0f} ms a model call, {args.repeats} turn(s) of each")  # fmt: skip
    print(f"{'':20} {'wall s':>8} {'ratio':>6} {'start-up s':>10} {'actors':>7} {'runs':>5}  same results")
    report: dict[str, Any] = {"settings": vars(args), "load_average": load}
    for command in ("tune", "compare"):
        base = statistics.median(r["wall_s"] for r in rows[command, "per-run"])
        for mode in MODES:
            got = rows[command, mode]
            wall = statistics.median(r["wall_s"] for r in got)
            ups = [r["start_up_s"] for r in got if r["start_up_s"] is not None]
            same = all(r["results"] == rows[command, "per-run"][0]["results"] for r in got)
            up = f"{statistics.median(ups):.2f}" if ups else "-"
            print(
                f"{command + ', ' + mode:20} {wall:8.1f} {wall / base:5.2f}x {up:>10} "
                f"{statistics.median(r['actors'] for r in got):7.0f} {got[0]['runs']:5}  "
                f"{'yes' if same else 'NO'} ({len(got[0]['results'])} tasks)"
            )
            report[f"{command}/{mode}"] = [{k: v for k, v in r.items() if k != "results"} for r in got]
            report[f"{command}/{mode}/same"] = same
    print(json.dumps(report))


if __name__ == "__main__":
    main()
