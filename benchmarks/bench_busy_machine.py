"""The demo's command on a busy machine: its wall time beside three busy loops against its time without them.

Runs `redraft run arithmetic --limit 10` (the demo's command) with a fresh seed and the response cache off, so
both runs make the same calls and none is answered from a cache: first as the machine is, then with three
`python -c 'while 1: pass'` processes at the driver's niceness, started before the run and stopped after it
(by this script, however it ends). Prints each wall time, the machine's load average around each run, and the
ratio. With ``--control``, a third run beside the same loops with the workers at Ray's own default (15 steps
nicer than the driver, as before redraft set it), stopped after ``--control-limit-s`` seconds if unfinished.

    .venv/bin/python benchmarks/bench_busy_machine.py [--limit 10] [--seed N] [--loops 3] [--control]

Target (the issue "A newcomer's second hour"): the busy run within 3x the other. On the same machine, before the
workers ran at the driver's priority, the busy run finished 0 of 10 tasks in 14 min 48 s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUSY = [sys.executable, "-c", "while 1: pass"]


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """``count`` busy processes at this process's niceness while the block runs; all stopped after it."""
    loops = [subprocess.Popen(BUSY) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()


def demo(out: Path, limit: int, seed: int, env: dict[str, str], timeout_s: float | None) -> tuple[float, bool]:
    """The demo's command's wall time, and whether it finished (within ``timeout_s``)."""
    command = [sys.executable, "-m", "redraft.cli", "run", "arithmetic", "--limit", str(limit)]
    command += ["--seed", str(seed), "--no-cache", "--out", str(out)]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, False
    return time.perf_counter() - start, done.returncode == 0


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def measured(
    label: str, out: Path, args: argparse.Namespace, env: dict[str, str], loops: int, limit_s: float | None = None
) -> float | None:
    """The demo's wall time beside ``loops`` busy loops; None when it did not finish."""
    before = load()
    with busy_loops(loops):
        seconds, finished = demo(out, args.limit, args.seed, env, limit_s)
    state = "finished" if finished else "NOT finished"
    print(f"{label}: {seconds:.1f} s, {state}; before it {before}, after it {load()}", flush=True)
    return seconds if finished else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--seed", type=int, default=random.randrange(1, 2**31), help="fresh by default")
    parser.add_argument("--loops", type=int, default=3)
    parser.add_argument("--control", action="store_true", help="also run at Ray's default worker niceness")
    parser.add_argument("--control-limit-s", type=float, default=900.0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the loops are stopped however it ends: kill too
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "REDRAFT_WORKER_NICENESS")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    print(f"seed {args.seed}, {args.limit} tasks, response cache off, {args.loops} busy loops at niceness {os.nice(0)}")
    with tempfile.TemporaryDirectory() as where:
        quiet = measured("as the machine is", Path(where) / "quiet", args, env, 0)
        busy = measured(f"beside {args.loops} busy loops", Path(where) / "busy", args, env, args.loops)
        if quiet is None or busy is None:
            print("no ratio: a run did not finish", flush=True)
        else:
            print(f"ratio: {busy / quiet:.2f}x (target: at most 3x)", flush=True)
        if args.control:
            nicer = env | {"REDRAFT_WORKER_NICENESS": str(min(os.nice(0) + 15, 19))}
            label = f"control, workers 15 steps nicer, beside {args.loops} loops"
            measured(label, Path(where) / "control", args, nicer, args.loops, args.control_limit_s)


if __name__ == "__main__":
    main()
