"""The HTTP paths of an OpenAI-compatible call, side by side: CPU per call and calls/s against the fake server.

redraft's ``openai:`` backend sends through the openai SDK over aiohttp (the SDK's
``DefaultAioHttpClient``), posting the body it built with the SDK's public ``post``
rather than through ``chat.completions.create``, which first walks the arguments
against the SDK's parameter types; its ``openai-compatible:`` backend posts the
same body over plain aiohttp (`redraft.backends._chat_wire`). This measures why:
the same chat completions (zero-latency `fake_http_model`, its own process, so
only the client's cost is measured), half of them plain drafts and half critiques
with redraft's JSON schema, with ``--in-flight`` calls at once, each path timed in
turn, ``--rounds`` times, in this one process:

- ``httpx, create``: the SDK as it comes;
- ``aiohttp, create``: the SDK over its aiohttp transport;
- ``aiohttp, post``: the SDK over aiohttp, the body posted as built (``openai:``);
- ``wire``: redraft's own client (``openai-compatible:``).

Printed per path: CPU milliseconds per call (this process's CPU time, the
server's excluded) and calls/s; then the ratios of CPU per call, default
transport to aiohttp, ``create`` to ``post``, and ``post`` to ``wire`` (above 1:
the second is cheaper). The machine is shared: compare the ratios of one run, not
absolute figures across runs.

Run: ``python benchmarks/bench_http_clients.py`` (``--in-flight 192 --calls 3000``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import fake_http_model
import openai
from openai.types.chat import ChatCompletion

from redraft.backends._chat_wire import ChatWire
from redraft.engine._answers import critique_json_schema

PATHS = ("httpx, create", "aiohttp, create", "aiohttp, post", "wire")
SCHEMA = critique_json_schema()
"""Made once, as the critic makes it once."""


def client(path: str, url: str) -> Any:
    extra = {"http_client": openai.DefaultAioHttpClient()} if path.startswith("aiohttp") else {}
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, **extra)


def body(i: int) -> dict[str, Any]:
    """A request shaped as redraft's: a system and a user message, a seed; every other one a critique."""
    arguments: dict[str, Any] = {
        "model": "fake",
        "temperature": 0.7,
        "max_tokens": 512,
        "seed": i,
        "messages": [
            {"role": "system", "content": "You are a careful assistant."},
            {"role": "user", "content": f"Question {i}: what is 17 + 25? Show your steps."},
        ],
    }
    if i % 2:
        arguments["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "critique", "schema": SCHEMA, "strict": False},
        }
    return arguments


async def measure(path: str, url: str, calls: int, in_flight: int) -> tuple[float, float]:
    """(CPU ms per call, calls/s) of ``calls`` completions, ``in_flight`` at once, after a warm-up."""
    if path == "wire":
        wire = ChatWire(f"{url}/v1", "none", timeout_s=600, spec="bench")
        return await timed(lambda i: wire.post(body(i)), calls, in_flight)
    async with client(path, url) as sdk:
        if path.endswith("post"):
            return await timed(
                lambda i: sdk.post("/chat/completions", body=body(i), cast_to=ChatCompletion), calls, in_flight
            )
        return await timed(lambda i: sdk.chat.completions.create(**body(i)), calls, in_flight)


async def timed(send: Callable[[int], Awaitable[object]], calls: int, in_flight: int) -> tuple[float, float]:
    gate = asyncio.Semaphore(in_flight)

    async def one(i: int) -> None:
        async with gate:
            await send(i)

    await asyncio.gather(*(one(i) for i in range(min(calls, in_flight * 2))))  # connections opened
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(calls)))
    return 1000 * (time.process_time() - cpu) / calls, calls / (time.perf_counter() - wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-flight", type=int, default=192, help="64 tasks of K=3 drafts, as one drafter sees them")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3, help="each path this many times, alternating")
    args = parser.parse_args()
    figures: dict[str, list[tuple[float, float]]] = {path: [] for path in PATHS}
    with fake_http_model.serve_in_background(0.0) as (url, _pid):
        for _ in range(args.rounds):
            for path in PATHS:
                figures[path].append(asyncio.run(measure(path, url, args.calls, args.in_flight)))
    print(f"{'path':<16} {'CPU ms/call':>12} {'calls/s':>8}   (medians of {args.rounds})")
    cpu = {}
    for path, runs in figures.items():
        cpu[path] = statistics.median(r[0] for r in runs)
        print(f"{path:<16} {cpu[path]:>12.2f} {statistics.median(r[1] for r in runs):>8.0f}")
    print(f"CPU per call, httpx / aiohttp (both create): {cpu[PATHS[0]] / cpu[PATHS[1]]:.2f}x")
    print(f"CPU per call, create / post (both aiohttp):  {cpu[PATHS[1]] / cpu[PATHS[2]]:.2f}x")
    print(f"CPU per call, SDK post / redraft's wire:     {cpu[PATHS[2]] / cpu[PATHS[3]]:.2f}x")


if __name__ == "__main__":
    main()
