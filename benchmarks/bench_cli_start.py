"""How long a `redraft` command takes before it does its own work: whole processes, timed from outside.

Each command runs --repeats times, in turns with the others (so a burst of load on a shared machine
falls on all of them alike); the median and the fastest are printed, and each median's ratio to the
baseline measured in the same run: a bare interpreter that imports the command line's own libraries
(typer and rich), which no redraft command can start faster than. The commands: `--help`, `--version`,
`run --help` (every option built), and `trace` and `export` on a small run directory written first
(no Ray, no model: what they wait for before reading it).

    .venv/bin/python benchmarks/bench_cli_start.py [--repeats 15]

Target (the issue "A newcomer's first hour"): `--help` and `--version` under 0.5 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository root: tests.support
REDRAFT = [sys.executable, "-m", "redraft.cli"]

from tests.support.report_runs import make_run  # noqa: E402 - after the path it is found on


def commands(run_dir: Path) -> dict[str, list[str]]:
    task = "suite/pass-first"
    return {
        "baseline: python -c 'import typer, rich.console'": [sys.executable, "-c", "import typer, rich.console"],
        "redraft --help": [*REDRAFT, "--help"],
        "redraft --version": [*REDRAFT, "--version"],
        "redraft run --help": [*REDRAFT, "run", "--help"],
        "redraft trace RUN TASK": [*REDRAFT, "trace", str(run_dir), task],
        "redraft export RUN --format csv": [*REDRAFT, "export", str(run_dir), "--format", "csv"],
    }


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as where:
        run_dir = Path(where) / "run"
        make_run(run_dir, max_rounds=2)  # a small finished run, written in-process (no Ray, no model)
        table = commands(run_dir)
        for command in table.values():
            timed(command)  # warm the file cache, compile the .pyc files
        seconds: dict[str, list[float]] = {name: [] for name in table}
        for _ in range(args.repeats):
            for name, command in table.items():
                seconds[name].append(timed(command))
    baseline = statistics.median(next(iter(seconds.values())))
    print(f"| command | median s | fastest s | median / baseline |  ({args.repeats} runs each, in turns)")
    print("|---|---|---|---|")
    for name, runs in seconds.items():
        median = statistics.median(runs)
        print(f"| {name} | {median:.3f} | {min(runs):.3f} | {median / baseline:.2f}x |")


if __name__ == "__main__":
    main()
