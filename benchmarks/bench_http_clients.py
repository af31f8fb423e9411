"""The openai SDK's two HTTP transports, side by side: CPU per call and calls/s against the fake server.

redraft's openai and anthropic backends send over aiohttp (the SDKs'
``DefaultAioHttpClient``) instead of the SDKs' default httpx transport. This
measures why: the same chat completions (zero-latency `fake_http_model`, its
own process, so only the client's cost is measured) with ``--in-flight`` calls
at once, each transport timed in turn, ``--rounds`` times, in this one process.
Printed per transport: CPU milliseconds per call (this process's CPU time, the
server's excluded), calls/s, and the ratio of the default's CPU per call to
aiohttp's (above 1: aiohttp is cheaper). The machine is shared: compare the
ratios of one run, not absolute figures across runs.

Run: ``python benchmarks/bench_http_clients.py`` (``--in-flight 192 --calls 3000``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import fake_http_model
import openai

TRANSPORTS = ("httpx (SDK default)", "aiohttp")


def client(kind: str, url: str) -> Any:
    extra = {"http_client": openai.DefaultAioHttpClient()} if kind == "aiohttp" else {}
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, **extra)


async def measure(kind: str, url: str, calls: int, in_flight: int) -> tuple[float, float]:
    """(CPU ms per call, calls/s) of ``calls`` completions, ``in_flight`` at once, after a warm-up."""
    async with client(kind, url) as sdk:
        gate = asyncio.Semaphore(in_flight)

        async def one(i: int) -> None:
            async with gate:
                await sdk.chat.completions.create(model="fake", messages=[{"role": "user", "content": f"{i}"}])

        await asyncio.gather(*(one(i) for i in range(min(calls, in_flight * 2))))  # connections opened
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(calls)))
        return 1000 * (time.process_time() - cpu) / calls, calls / (time.perf_counter() - wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-flight", type=int, default=192, help="64 tasks of K=3 drafts, as one drafter sees them")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3, help="each transport this many times, alternating")
    args = parser.parse_args()
    figures: dict[str, list[tuple[float, float]]] = {kind: [] for kind in TRANSPORTS}
    with fake_http_model.serve_in_background(0.0) as (url, _pid):
        for _ in range(args.rounds):
            for kind in TRANSPORTS:
                figures[kind].append(asyncio.run(measure(kind, url, args.calls, args.in_flight)))
    print(f"{'transport':<20} {'CPU ms/call':>12} {'calls/s':>8}   (medians of {args.rounds})")
    medians = {}
    for kind, runs in figures.items():
        medians[kind] = statistics.median(r[0] for r in runs)
        print(f"{kind:<20} {medians[kind]:>12.2f} {statistics.median(r[1] for r in runs):>8.0f}")
    print(f"CPU per call, default / aiohttp: {medians[TRANSPORTS[0]] / medians[TRANSPORTS[1]]:.2f}x")


if __name__ == "__main__":
    main()
