"""A pipeline step's sandbox round trip against a bare subprocess, and steps per second with many at once.

A step is a program that reads a task's files and writes ``output.csv``: here the pipeline scenario's reference
program on a difficulty-4 case (about 20 KB of input). (a) One step at a time: the sandbox (files handed in,
the program run in its namespaces under its limits, the output collected) against a bare ``python -I`` in a
temporary directory doing the same (files written, run, output read), medians over ``--runs``. (b) Many tasks'
steps at once, as the verifier actors of a run make them: steps per second with 1, 2 and 4 threads each running
sandboxed steps back to back.

Run: ``python benchmarks/bench_sandbox_files.py`` (``--runs N``, ``--steps N``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support

from redraft.sandbox import SandboxLimits, run_python
from redraft.scenarios.builtin._pipeline_data import make_case

REFERENCE = (Path(__file__).resolve().parent.parent / "tests" / "support" / "pipeline_reference.py").read_text()
PROGRAM = REFERENCE.replace('p.name != "output.csv"', 'p.name not in ("output.csv", "main.py")')
LIMITS = SandboxLimits(timeout_s=20.0, cpu_s=20)


def sandboxed(files: dict[str, bytes]) -> bytes:
    result = run_python(PROGRAM, limits=LIMITS, files=files, outputs=("output.csv",))
    assert result.ok and "output.csv" in result.files, result.stderr[-500:]
    return result.files["output.csv"]


def bare(files: dict[str, bytes]) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        for name, data in files.items():
            Path(folder, name).write_bytes(data)
        Path(folder, "main.py").write_text(PROGRAM)
        subprocess.run([sys.executable, "-I", "main.py"], cwd=folder, check=True, timeout=20)
        return Path(folder, "output.csv").read_bytes()


def median_s(step: object, files: dict[str, bytes], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        step(files)  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def steps_per_s(files: dict[str, bytes], threads: int, steps: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda _: sandboxed(files), range(steps)))
    return steps / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--steps", type=int, default=24)
    args = parser.parse_args()
    files = make_case(seed=1, difficulty=4).files
    assert sandboxed(files) == bare(files)  # the same table either way
    times = {"bare": median_s(bare, files, args.runs), "sandbox": median_s(sandboxed, files, args.runs)}
    rates = {threads: steps_per_s(files, threads, args.steps) for threads in (1, 2, 4)}
    size = sum(len(data) for data in files.values())
    print(f"# {date.today()}, {platform.machine()}, {os.cpu_count()} cores: the reference program on a "
          f"difficulty-4 pipeline case ({len(files)} files, {size:,} bytes in)")  # fmt: skip
    print(f"one step: bare subprocess {times['bare'] * 1000:.0f} ms, sandbox {times['sandbox'] * 1000:.0f} ms "
          f"({times['sandbox'] / times['bare']:.2f}x)")  # fmt: skip
    by_threads = ", ".join(f"{t}: {r:.1f} ({r / rates[1]:.2f}x)" for t, r in rates.items())
    print(f"steps/s, sandboxed, by threads: {by_threads}")
    print(json.dumps({"step_s": times, "steps_per_s": rates}))


if __name__ == "__main__":
    main()
