"""The embedded model's batched path against its sequential path, as ratios measured in the same run.

Both paths run the same requests (distinct prompts, seeded, temperature 0.7,
up to 48 tokens each) with 1, 4, 8 and 16 calls in flight, then 8 calls whose
prompts open with the same long system message (a task's rules, some 600
tokens) and differ after it: the batched path evaluates that prefix once and
copies it (`prefix reused` counts the prompt tokens it did not evaluate), the
sequential path reuses what its one context holds from the call before. The sequential
path is the old one: one ``Llama`` object behind a lock, one call at a time.
The batched path decodes up to 16 sequences per step. Printed per level:
output tokens/s and calls/s of each path, the batched/sequential ratios, and
whether every call produced the same text on both paths (it should: a call's
text depends only on its prompt, seed and temperature). Timings on a shared
2-core machine are noisy; compare the ratios, not the absolute figures.

Run: `.venv/bin/python benchmarks/bench_local_batching.py`.
"""

from __future__ import annotations

import asyncio
import json
import time

from redraft.backends.base import ChatRequest, Completion
from redraft.backends.local import LocalModelHost, embedded_model_path
from redraft.protocols.messages import ChatMessage

LEVELS = (1, 4, 8, 16)
MAX_TOKENS = 48
THREADS = 2
QUESTIONS = [
    "Write a Python function that adds two numbers.",
    "What is 17 + 25? Explain.",
    "Name three colors and one thing of each color.",
    "Tell me a short joke about cats.",
    "Describe the water cycle in two sentences.",
    "Give me three tips for learning to code.",
    "What is the capital of France, and why is it famous?",
    "Write a haiku about the sea.",
    "How many legs does a spider have?",
    "Explain what a prime number is.",
    "List four fruits that are red.",
    "What does a compiler do?",
    "Write a Python function that reverses a string.",
    "Why is the sky blue?",
    "Suggest a name for a pet turtle.",
    "What is 9 times 8?",
]


SHARED_LEVEL = 8
RULES = " ".join(
    f"Rule {i}: an answer about topic {i} names its sources, states its units, and checks its arithmetic twice."
    for i in range(24)
)
"""The system message every call of the shared-prefix row opens with."""


def requests_for(level: int, *, shared: bool = False) -> list[ChatRequest]:
    count = max(4, level)  # kept small: the machine this runs on is shared and has 2 cores
    system = [ChatMessage(role="system", content=RULES)] if shared else []
    return [
        ChatRequest(
            messages=[*system, ChatMessage(role="user", content=QUESTIONS[i % len(QUESTIONS)])],
            max_tokens=MAX_TOKENS,
            temperature=0.7,
            seed=1000 + i,
        )
        for i in range(count)
    ]


async def drive(host: LocalModelHost, requests: list[ChatRequest], in_flight: int) -> tuple[float, list[Completion]]:
    slots = asyncio.Semaphore(in_flight)

    async def one(request: ChatRequest) -> Completion:
        async with slots:
            return await host.complete(request)

    started = time.perf_counter()
    replies = await asyncio.gather(*(one(r) for r in requests))
    return time.perf_counter() - started, list(replies)


def measure(host: LocalModelHost, level: int, *, shared: bool = False) -> tuple[dict[str, float], list[str]]:
    requests = requests_for(level, shared=shared)
    elapsed, replies = asyncio.run(drive(host, requests, level))
    tokens = sum(r.usage.output_tokens for r in replies)
    figures = {"tokens_per_s": tokens / elapsed, "calls_per_s": len(replies) / elapsed, "seconds": elapsed}
    return figures, [r.text for r in replies]


def main() -> None:
    path = str(embedded_model_path())
    sequential = LocalModelHost(path, threads=THREADS, batched=False)
    batched = LocalModelHost(path, threads=THREADS, parallel=max(LEVELS))
    warm_up = requests_for(1)[:1]
    for host in (sequential, batched):
        asyncio.run(drive(host, warm_up, 1))  # load the model outside the timings
    header = f"{'in flight':>9} {'calls':>5} {'seq tok/s':>9} {'batch tok/s':>11} {'ratio':>5}"
    print(header + f" {'seq calls/s':>11} {'batch calls/s':>13} {'ratio':>5} {'same text':>9}", flush=True)
    rows = []
    for level, shared in [*((level, False) for level in LEVELS), (SHARED_LEVEL, True)]:
        before, before_texts = measure(sequential, level, shared=shared)
        reused = batched.prefix_tokens_reused()
        after, after_texts = measure(batched, level, shared=shared)
        r = {
            "in_flight": f"{level}, shared prefix" if shared else level,
            "calls": len(before_texts),
            "sequential_tokens_per_s": round(before["tokens_per_s"], 1),
            "batched_tokens_per_s": round(after["tokens_per_s"], 1),
            "tokens_ratio": round(after["tokens_per_s"] / before["tokens_per_s"], 2),
            "sequential_calls_per_s": round(before["calls_per_s"], 2),
            "batched_calls_per_s": round(after["calls_per_s"], 2),
            "calls_ratio": round(after["calls_per_s"] / before["calls_per_s"], 2),
            "same_text": before_texts == after_texts,
            "prefix_tokens_reused": batched.prefix_tokens_reused() - reused,
        }
        rows.append(r)
        print(
            f"{r['in_flight']:>9} {r['calls']:>5} {r['sequential_tokens_per_s']:>9} {r['batched_tokens_per_s']:>11}"
            f" {r['tokens_ratio']:>5} {r['sequential_calls_per_s']:>11} {r['batched_calls_per_s']:>13}"
            f" {r['calls_ratio']:>5} {r['same_text']!s:>9}"
            + (f"  prefix reused: {r['prefix_tokens_reused']} tokens" if shared else ""),
            flush=True,
        )
    sequential.close()
    batched.close()
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
