"""``redraft view`` at scale: time to the first page and to a filtered page, and the server's memory.

For each size, a run directory is written through the real writer as `bench_scale.py` writes its own
(arithmetic, K=2, two rounds, a scripted model wrong in round 0 and right in round 1; the engine's frames for
500 distinct tasks, copied with their ids and digits permuted). Then the real command serves it
(``redraft view ROOT --port 0``, a process of its own) and, over HTTP on 127.0.0.1:

- **first page**: from the server's start to the run's page answered (a page waits at most a second for the
  run's records, then shows what is read and fills in);
- **all read**: from the server's start until the run's page holds every task (its records all read);
- **list**: the first page, ``/``, once the server is up;
- **filtered**: the run's page with filters (``feedback=pass&rounds_min=2&q=answer``), rows already in memory;
- **task**: one task's page (its record found, its frames read);
- **memory**: the server's resident set afterwards and its peak (``VmRSS``, ``VmHWM``).

Run: `.venv/bin/python benchmarks/bench_view.py` (sizes: `--sizes 1000 10000 100000`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_scale import base_frames, write_run

_open = urllib.request.build_opener(urllib.request.ProxyHandler({})).open
FILTER = "feedback=pass&rounds_min=2&q=answer"


def fetch(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with _open(url, timeout=600) as answer:
        body = answer.read()
    return time.perf_counter() - started, len(body)


def memory_mb(pid: int) -> tuple[float, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    peak = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    return rss / 1024, peak / 1024


def measure(root: Path) -> dict[str, float]:
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    started = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "redraft.cli", "view", str(root), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert server.stdout is not None
        url = re.search(r"(http://\S+)", server.stdout.readline()).group(1)  # type: ignore[union-attr]
        fetch(url + "run?d=run")
        first = time.perf_counter() - started
        while b'data-loading="1"' in _open(url + "run?d=run&part=live", timeout=600).read():
            time.sleep(0.05)  # a benchmark's poll, as the page's own script polls
        complete = time.perf_counter() - started
        listed, _ = fetch(url)
        filtered, _ = fetch(f"{url}run?d=run&{FILTER}")
        task, _ = fetch(f"{url}task?d=run&id=task-0000007")
        rss, peak = memory_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=60)
    return {
        "first": first,
        "complete": complete,
        "list": listed,
        "filtered": filtered,
        "task": task,
        "rss": rss,
        "peak": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    base = base_frames()
    columns = ("first page s", "all read s", "list s", "filtered s", "task s", "RSS MB", "peak MB")
    print(f"{'tasks':>8} " + " ".join(f"{c:>{len(c)}}" for c in columns))
    for n in args.sizes:
        with TemporaryDirectory() as tmp:
            root = Path(tmp) / "runs"
            write_run(root / "run", base, n)
            m = measure(root)
        keys = ("first", "complete", "list", "filtered", "task", "rss", "peak")
        cells = [f"{m[k]:>{len(c)}.{0 if 'MB' in c else 2}f}" for k, c in zip(keys, columns, strict=True)]
        print(f"{n:>8,} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
