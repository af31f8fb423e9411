"""Where a model call's CPU goes, process by process: py-spy on every redraft process of a steady run.

A redraft run against the fake OpenAI-compatible server (`fake_http_model`, its
own process, zero latency by default so the engine is the bottleneck) goes on in
this process while py-spy samples the driver and each role actor (found by their
``ray::<Role>`` process titles) for ``--seconds`` of its steady state. Printed per
process: the CPU seconds it used in the window (from /proc, not from the samples),
those seconds per model call the server answered in the window, and where its
samples were, folded by the outermost frame that is not the asyncio or Ray
machinery around it: the top ``--top`` leaf functions (own time) and the share
of samples inside each of redraft, msgspec, the openai SDK and its HTTP stack,
Ray's core worker, and asyncio itself.

Run: ``python benchmarks/profile_actors.py`` (``--latency 0.2 --in-flight 16`` for
the latency-bound shape). py-spy must be able to attach (root, or
``kernel.yama.ptrace_scope=0``). Samples of a shared 2-core machine: compare shares,
not absolute seconds.
"""

from __future__ import annotations

import argparse
import contextlib
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

ROLES = ("ArbiterActor", "DrafterActor", "CriticActor", "VerifierActor", "GraderActor", "LocalModelHost")
AREAS = {
    "redraft": ("redraft/",),
    "msgspec": ("msgspec",),
    "openai + http": ("openai/", "httpx", "httpcore", "h11", "anyio", "sniffio", "pydantic"),
    "ray core": ("ray/_private", "ray/actor.py", "ray/_raylet", "ray/remote_function", "ray/util"),
    "asyncio": ("asyncio/",),
}


def _processes() -> dict[str, list[int]]:
    """Pids of this driver and of each role's actors, by role, from the process titles."""
    found: dict[str, list[int]] = {"driver": [os.getpid()]}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        for role in ROLES:
            if title.startswith(f"ray::{role}"):
                found.setdefault(role, []).append(int(entry.name))
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
    args = parser.parse_args()

    from redraft import RunConfig, run
    from redraft.scenarios import get_scenario

    with fake_http_model.serve_in_background(args.latency) as (url, _server), tempfile.TemporaryDirectory() as tmp:
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
                report.extend(_sample_window(url, args.seconds, args.top, Path(tmp)))
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
            run(config, on_result=on_result)
        print("\n".join(report) if report else "the run ended before the window: raise --tasks")


def _sample_window(url: str, seconds: float, top: int, tmp: Path) -> list[str]:
    """Sample every redraft process for ``seconds``; the report's lines."""
    pids = _processes()
    before = {pid: process_stat(pid)[1] for group in pids.values() for pid in group}
    calls_before = fake_http_model.stats(url)["count"]
    spies = {pid: (_record(pid, seconds, tmp / f"{pid}.txt"), role) for role, group in pids.items() for pid in group}
    for spy, _ in spies.values():
        spy.wait()
    calls = fake_http_model.stats(url)["count"] - calls_before
    lines = [f"{calls:.0f} model calls in the {seconds:g} s window ({calls / seconds:.0f}/s)"]
    grand = 0.0
    for pid, (_spy, role) in spies.items():
        used = process_stat(pid)[1] - before[pid]
        grand += used
        samples = tmp / f"{pid}.txt"
        leaves, areas, total = _fold(samples.read_text() if samples.exists() else "")
        lines.append(f"\n== {role} (pid {pid}): {used:.2f} CPU s, {1000 * used / max(calls, 1):.2f} ms per model call")
        if total:
            lines.append("   areas: " + ", ".join(f"{name} {100 * n / total:.0f}%" for name, n in areas.most_common()))
            lines += [f"   {100 * n / total:5.1f}%  {leaf}" for leaf, n in leaves.most_common(top)]
    lines.append(f"\nall profiled processes: {1000 * grand / max(calls, 1):.2f} ms CPU per model call")
    return lines


if __name__ == "__main__":
    main()
