"""HTTP backend throughput against the ideal, as a ratio measured in the same run.

A fake OpenAI-compatible server on 127.0.0.1 answers every call after 200 ms.
With N calls in flight the ideal throughput is N / 0.2 s; the benchmark drives
the `openai-compatible` backend (the real `openai` SDK over real HTTP, through
redraft's retry layer) at 16, 64 and 256 in flight and prints achieved / ideal.

Run: `.venv/bin/python benchmarks/bench_backends.py` (part of `make bench`).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support

from redraft.backends.base import ChatRequest
from redraft.backends.registry import resolve
from redraft.protocols.messages import ChatMessage
from tests.support.fake_llm_servers import FakeLLMServer

LATENCY_S = 0.2


async def drive(backend: object, in_flight: int, calls: int) -> float:
    slots = asyncio.Semaphore(in_flight)
    request = ChatRequest(messages=[ChatMessage(role="user", content="Mia has 3 apples...")], max_tokens=16)

    async def one() -> None:
        async with slots:
            await backend.complete(request)  # type: ignore[attr-defined]

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    return time.perf_counter() - started


def main() -> None:
    rows = []
    with FakeLLMServer() as server:
        server.latency_s = LATENCY_S
        server.reply_text = "Answer: 7"
        backend = resolve(f"openai-compatible:fake@{server.openai_base_url}").create()
        for in_flight in (16, 64, 256):
            calls = in_flight * 5  # five "waves"
            elapsed = asyncio.run(drive(backend, in_flight, calls))
            achieved, ideal = calls / elapsed, in_flight / LATENCY_S
            rows.append(
                {
                    "in_flight": in_flight,
                    "calls": calls,
                    "achieved_per_s": round(achieved, 1),
                    "ideal_per_s": ideal,
                    "ratio": round(achieved / ideal, 3),
                }
            )
            backend = resolve(f"openai-compatible:fake@{server.openai_base_url}").create()  # fresh client per loop
    print(f"{'in flight':>10} {'calls':>6} {'achieved/s':>11} {'ideal/s':>8} {'ratio':>6}")
    for r in rows:
        print(
            f"{r['in_flight']:>10} {r['calls']:>6} {r['achieved_per_s']:>11} {r['ideal_per_s']:>8.0f} {r['ratio']:>6}"
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
