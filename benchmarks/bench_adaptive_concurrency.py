"""Adaptive concurrency against a rate-limited server, and what asking the limiter costs, in one run.

(a) A fake OpenAI-compatible server (`fake_http_model`, its own process) answers at most N model requests in any
W seconds and 429s the rest, with a ``Retry-After`` saying when a slot frees, as providers do. redraft runs the
same tasks against it twice: with fixed concurrency (``?adaptive=0``: every call of the tasks in flight goes out
at once, each 429 retried with backoff) and with the endpoint's adaptive limiter (the default). Printed: the
accepted calls/s as a share of the limit's N/W, the share of requests the server refused, and the run's wall
time. (b) The same server with no limit and no latency: calls/s with the default (adaptive, which asks the
limiter only once the endpoint has throttled a call) and with a limiter asked before every attempt (two actor
calls each), against no limiter.

Run: ``python benchmarks/bench_adaptive_concurrency.py`` (``--limit N W``, ``--latency S``, ``--tasks T``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import date
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import fake_http_model

K = 4


QUERIES = {"fixed": "?adaptive=0", "adaptive": "", "asking": "?inflight=100000"}
"""How each side's endpoint is given: no limiter; the default (adaptive, asked once throttled); adaptive and asked
before every attempt from the first (a limit given: ``inflight=``, here one that never binds)."""


def one_run(url: str, out: str, tasks: int, in_flight: int, side: str) -> dict[str, Any]:
    """Run self-consistency (K drafts a task) on ``tasks`` arithmetic tasks; what the server saw, and the wall."""
    from redraft import RunConfig, run
    from redraft.errors import ClusterError

    spec = f"openai-compatible:fake@{url}/v1" + QUERIES[side]
    config = RunConfig.build(
        strategy="self_consistency", samples=K, limit=tasks, max_tasks_in_flight=in_flight,
        drafter=spec, critic=spec, cache=False, out=out,
    )  # fmt: skip
    fake_http_model.reset(url)
    started = time.monotonic()
    try:
        errors = sum(run(config).summary.errors.values())
        stopped = ""
    except ClusterError:  # every retry of a few tasks was refused: the run took the endpoint for down
        errors, stopped = 0, "stopped: endpoint taken for down"
    wall = time.monotonic() - started
    seen = fake_http_model.stats(url)
    answered, refused = int(seen["count"]), int(seen["refused"])
    return {
        "answered": answered,
        "refused": refused,
        "refused_share": refused / max(answered + refused, 1),
        "calls_per_s": answered / max(seen["last"] - seen["first"], 1e-9),
        "wall_s": wall,
        "errors": errors,
        "stopped": stopped,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=float, nargs=2, default=[40, 2.0], metavar=("N", "W"))
    parser.add_argument("--latency", type=float, default=0.1, help="the server's seconds per request")
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--in-flight", type=int, default=16, help="tasks in flight (each with K calls out)")
    parser.add_argument(
        "--overhead-tasks", type=int, default=1500, help="(b)'s tasks: a shorter run measures the start-up"
    )
    args = parser.parse_args()
    n, window = int(args.limit[0]), float(args.limit[1])
    allowed = n / window
    rows: dict[str, dict[str, Any]] = {}
    with TemporaryDirectory() as tmp:
        with fake_http_model.serve_in_background(args.latency, limit=(n, window)) as (url, _):
            for name in ("fixed", "adaptive"):
                rows[name] = one_run(url, f"{tmp}/{name}", args.tasks, args.in_flight, name)
                rows[name]["share_of_limit"] = rows[name]["calls_per_s"] / allowed
        with fake_http_model.serve_in_background(0.0) as (url, _):
            speed = {
                name: one_run(url, f"{tmp}/free-{name}", args.overhead_tasks, 64, name)["calls_per_s"]
                for name in QUERIES
            }
    print(f"# {date.today()}, {platform.machine()}, {os.cpu_count()} cores: K={K}, {args.tasks} tasks, "
          f"{args.in_flight} in flight, a limit of {n} requests per {window:g} s ({allowed:g}/s), "
          f"{args.latency * 1000:.0f} ms a request")  # fmt: skip
    print(f"{'':>9} {'answered':>8} {'calls/s':>8} {'of limit':>9} {'refused':>8} {'wall s':>7} {'errors':>6}")
    for name, row in rows.items():
        print(
            f"{name:>9} {row['answered']:>8} {row['calls_per_s']:>8.1f} {row['share_of_limit']:>9.0%} "
            f"{row['refused_share']:>8.0%} {row['wall_s']:>7.1f} {row['errors']:>6} {row['stopped']}"
        )
    fixed, adaptive = rows["fixed"], rows["adaptive"]
    print(
        f"adaptive / fixed: calls/s {adaptive['calls_per_s'] / fixed['calls_per_s']:.2f}x, "
        f"refused {adaptive['refused_share'] / max(fixed['refused_share'], 1e-9):.2f}x"
    )
    print(
        f"no limit, no latency, {args.overhead_tasks} tasks: {speed['fixed']:.0f} calls/s without a limiter; "
        f"adaptive, never throttled so never asked, {speed['adaptive'] / speed['fixed']:.2f}x; "
        f"asked before every attempt {speed['asking'] / speed['fixed']:.2f}x"
    )
    print(json.dumps({"limited": rows, "unlimited_calls_per_s": speed}))


if __name__ == "__main__":
    main()
