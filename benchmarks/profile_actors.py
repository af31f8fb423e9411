"""Where a model call's CPU goes, process by process: py-spy on every redraft process of a steady run.

A redraft run against the fake OpenAI-compatible server (`fake_http_model`, its
own process, zero latency by default so the engine is the bottleneck) goes on in
this process while py-spy samples the driver and every actor (found by their
``ray::<Class>`` process titles) for ``--seconds`` of its steady state. Ray's own
processes (GCS, raylet, its agents: every other process started under this one but
the server) are measured too, not sampled. Printed per
process: the CPU seconds it used in the window (from /proc, not from the samples),
those seconds per model call the server answered in the window, and where its
samples were, folded by the outermost frame that is not the asyncio or Ray
machinery around it: the top ``--top`` leaf functions (own time) and the share
of samples inside each of redraft, msgspec, the openai SDK and its HTTP stack,
Ray's core worker, and asyncio itself.

Run: ``python benchmarks/profile_actors.py`` (``--latency 0.2 --in-flight 16`` for
the latency-bound shape; ``--no-spy`` to measure the CPU alone, with nothing attached,
as when comparing two versions of the code in turns: the last line is JSON). py-spy must be able to attach (root, or
``kernel.yama.ptrace_scope=0``). Samples of a shared 2-core machine: compare shares,
not absolute seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from itertools import islice
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import fake_http_model
from bench_engine_throughput import process_stat

from redraft import RunHooks

AREAS = {
    "redraft": ("redraft/",),
    "msgspec": ("msgspec",),
    "openai + http": ("openai/", "httpx", "httpcore", "h11", "anyio", "sniffio", "pydantic"),
    "ray core": ("ray/_private", "ray/actor.py", "ray/_raylet", "ray/remote_function", "ray/util"),
    "asyncio": ("asyncio/",),
}


def _processes(server: int) -> dict[str, list[int]]:
    """Pids of this driver and of every process started under it but the server, by name: an actor's class from
    its ``ray::<Class>[.method]`` title, else the program's file name (``gcs_server``, ``raylet``, ...)."""
    parents: dict[int, int] = {}
    titles: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parents[int(entry.name)] = process_stat(int(entry.name))[0]
            titles[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
    found: dict[str, list[int]] = {"driver": [os.getpid()]}
    todo = [os.getpid()]
    while todo:
        parent = todo.pop()
        for pid in [pid for pid, ppid in parents.items() if ppid == parent and pid != server]:
            words = titles.get(pid, "").split() or ["?"]
            name = words[0][5:].split(".")[0] if words[0].startswith("ray::") else Path(words[0]).name
            found.setdefault(name or "?", []).append(pid)
            todo.append(pid)
    return found


def _fold(raw: str) -> tuple[Counter[str], Counter[str], int]:
    """Leaf functions and areas of py-spy's collapsed stacks (``frame;frame;... count``)."""
    leaves: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        leaves[frames[-1]] += count
        # The area is that of the innermost frame that belongs to a named area.
        for frame in reversed(frames):
            area = next((name for name, marks in AREAS.items() if any(m in frame for m in marks)), None)
            if area is not None:
                areas[area] += count
                break
        else:
            areas["other (C, stdlib)"] += count
    return leaves, areas, total


def _record(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    spy = Path(sys.executable).with_name("py-spy")
    return subprocess.Popen(
        [
            str(spy),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(int(seconds)),
            "--format",
            "raw",
            "--rate",
            "200",
            "--nonblocking",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.0, help="the server's seconds per request")
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--tasks", type=int, default=4000, help="enough that the run outlasts the window")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to sample, once the run is steady")
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--no-spy", action="store_true", help="measure the CPU only, with no sampler attached")
    parser.add_argument("--keep", type=Path, help="keep py-spy's collapsed stacks here, one file per process")
    args = parser.parse_args()

    from redraft import RunConfig, run
    from redraft.scenarios import get_scenario

    with fake_http_model.serve_in_background(args.latency) as (url, server), tempfile.TemporaryDirectory() as tmp:
        spec = f"openai-compatible:fake@{url}/v1"
        tasks = list(islice(get_scenario("arithmetic").tasks(seed=0), args.tasks))
        config = RunConfig.build(
            strategy="adversarial",
            samples=3,
            max_rounds=3,
            limit=len(tasks),
            max_tasks_in_flight=args.in_flight,
            drafter=spec,
            critic=spec,
            cache=False,
            out=f"{tmp}/run",
        )
        report: list[str] = []
        window_over = threading.Event()
        done = 0

        def sample() -> None:
            try:
                report.extend(_sample_window(url, server, args, Path(tmp)))
            finally:
                window_over.set()

        def on_result(_result: Any) -> None:
            nonlocal done
            done += 1
            if done == 2 * args.in_flight:  # every actor is up and every slot has turned over at least once
                threading.Thread(target=sample, daemon=True).start()
            if window_over.is_set():
                raise KeyboardInterrupt  # the window is over: stop the run (its actors are shut down)

        with contextlib.suppress(KeyboardInterrupt):
            run(config, hooks=RunHooks(on_result=on_result))
        print("\n".join(report) if report else "the run ended before the window: raise --tasks")


def _cpu(pids: dict[str, list[int]]) -> dict[int, float]:
    used: dict[int, float] = {}
    for group in pids.values():
        for pid in group:
            with contextlib.suppress(OSError):
                used[pid] = process_stat(pid)[1]
    return used


def _sample_window(url: str, server: int, args: argparse.Namespace, tmp: Path) -> list[str]:
    """Measure (and unless ``--no-spy``, sample) every redraft process for ``args.seconds``; the report's lines."""
    pids = _processes(server)
    before = _cpu(pids)
    calls_before = fake_http_model.stats(url)["count"]
    spies: dict[int, subprocess.Popen[bytes]] = {}
    if not args.no_spy:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
        where = args.keep or tmp
        spies = {
            pid: _record(pid, args.seconds, where / f"{name}-{pid}.txt")
            for name, group in pids.items()
            for pid in group
        }
        for spy in spies.values():
            spy.wait()
    else:
        threading.Event().wait(args.seconds)
    calls = fake_http_model.stats(url)["count"] - calls_before
    after = _cpu(pids)
    lines = [f"{calls:.0f} model calls in the {args.seconds:g} s window ({calls / args.seconds:.0f}/s)"]
    per_name: dict[str, float] = {}
    for name, group in sorted(pids.items(), key=lambda item: -sum(after.get(p, 0) - before.get(p, 0) for p in item[1])):
        for pid in group:
            used = after.get(pid, before.get(pid, 0.0)) - before.get(pid, 0.0)
            per_name[name] = per_name.get(name, 0.0) + used
            samples = (args.keep or tmp) / f"{name}-{pid}.txt"
            leaves, areas, total = _fold(samples.read_text() if samples.exists() else "")
            if not total and used < 0.01:
                continue
            lines.append(f"\n== {name} (pid {pid}): {used:.2f} CPU s, {1000 * used / max(calls, 1):.3f} ms per call")
            if total:
                shares = ", ".join(f"{area} {100 * n / total:.0f}%" for area, n in areas.most_common())
                lines.append(f"   areas: {shares}")
                lines += [f"   {100 * n / total:5.1f}%  {leaf}" for leaf, n in leaves.most_common(args.top)]
    grand = sum(per_name.values())
    lines.append(f"\nall processes but the server: {1000 * grand / max(calls, 1):.3f} ms CPU per model call")
    ms = {name: round(1000 * used / max(calls, 1), 3) for name, used in per_name.items() if used >= 0.005}
    figures = {
        "calls": calls,
        "calls_per_s": round(calls / args.seconds, 1),
        "ms_per_call": round(1000 * grand / max(calls, 1), 3),
    }
    lines.append(json.dumps({**figures, "ms_per_call_by_process": ms}))
    return lines


if __name__ == "__main__":
    main()
