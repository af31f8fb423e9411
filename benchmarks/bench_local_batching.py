"""The embedded model's tokens/s through redraft against llama.cpp alone, one at a time and batched, in one run.

Every path runs the same requests (distinct prompts, seeded, temperature 0.7, up
to 48 tokens each) with 1, 4, 8 and 16 calls in flight, then 8 calls whose
prompts open with the same long system message (a task's rules, some 600
tokens) and differ after it. The paths, each on 2 threads:

- ``llama.cpp seq``: llama-cpp-python's ``Llama``, one chat completion at a time
  behind a lock (redraft's sequential path, and what the host was before it
  batched); it reuses what its one context held from the call before.
- ``llama.cpp batch``: llama.cpp's C API in a plain loop (`RawBatched`): up to
  the host's `DEFAULT_PARALLEL` sequences, each prompt evaluated alone as a slot
  frees, then one decode for every started sequence's next token. No scheduler,
  no prefix reuse: what the host's scheduling is measured against.
- ``host``: redraft's `LocalModelHost`, called in the same process: the batched
  scheduler with `DEFAULT_PARALLEL` slots (``prefix reused`` counts the prompt
  tokens it took from a stream that held them instead of evaluating).
- ``on Ray``: the same requests through redraft's deployed path: a Ray actor (as
  a role actor would) sends each to the node's host actor with the local
  backend's client (MessagePack over a Ray call each way).

Each path runs every row in a process of its own, one path after the other, so that
none shares its threads (llama.cpp's among them) with another: in one process, a
path measured right after another ran slower. Every row's prompts are new to every
path (numbered questions). With 16 in flight the batched paths hold 8 and queue
the rest, as redraft does.

Printed per level: output tokens/s of each path, the host over the sequential
path (``host/seq``), the host and the Ray path over llama.cpp batched
(``host/raw``, ``ray/raw``: below 1.0 is what the machinery costs, above it
what prefix reuse saves), and whether every call produced the same text on every
path (it should: a call's text depends only on its prompt, seed and temperature). Timings on a shared
2-core machine are noisy; compare the ratios, not the absolute figures.

Run: `.venv/bin/python benchmarks/bench_local_batching.py` (about 2 minutes; a table, then the rows as JSON).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import deque
from typing import Any

import msgspec

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from redraft.backends._llama_batch import BATCH_TOKENS, llama_module, load, tokenize
from redraft.backends._llama_chat import ChatPrompts
from redraft.backends._llama_sampling import SamplerChain, token_piece
from redraft.backends.base import ChatRequest, Completion
from redraft.backends.local import CONTEXT_TOKENS, DEFAULT_PARALLEL, LocalClient, LocalModelHost, embedded_model_path
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
ROWS = [*((level, False) for level in LEVELS), (SHARED_LEVEL, True)]
RULES = " ".join(
    f"Rule {i}: an answer about topic {i} names its sources, states its units, and checks its arithmetic twice."
    for i in range(24)
)
"""The system message every call of the shared-prefix row opens with."""


def requests_for(level: int, *, first: int, shared: bool = False) -> list[ChatRequest]:
    """The calls of one row: numbered from `first`, so that no row repeats a prompt an earlier row had (the
    host would draw its first token from the prompt it kept; see `llama_batch`)."""
    count = max(4, level)  # kept small: the machine this runs on is shared and has 2 cores
    system = [ChatMessage(role="system", content=RULES)] if shared else []
    return [
        ChatRequest(
            messages=[*system, ChatMessage(role="user", content=f"Question {n}. {QUESTIONS[n % len(QUESTIONS)]}")],
            max_tokens=MAX_TOKENS,
            temperature=0.7,
            seed=1000 + n,
        )
        for n in range(first, first + count)
    ]


class RawBatched:
    """llama.cpp's C API with nothing around it: the baseline redraft's batched host is measured against.

    One context with the host's settings (`llama_batch.load`: a KV stream of `CONTEXT_TOKENS` per
    sequence, flash attention off; `THREADS` threads) and a plain loop: while a slot is free, the next prompt is
    evaluated alone; then one decode gives every started sequence its next token. Sequences draw
    with the same sampler chains as the host (`SamplerChain`, llama.cpp's samplers), so every
    call's text must equal the host's; what the loop leaves out is everything the host adds:
    futures, the scheduler's bookkeeping, stop strings (these requests set none; the chat
    template's end-of-turn is the end-of-generation token), prefix reuse, asyncio and chat
    formatting (done before the clock starts). It does keep what any batched decoding of
    llama.cpp's KV streams needs: the rows of a step in slot order and the lowest free slot
    taken first, since a graph only holds sequences whose ids follow one another.
    """

    def __init__(self, path: str, parallel: int) -> None:
        self.lib = llama_module()
        self.model, self.context = load(path, parallel=parallel, ctx_per_seq=CONTEXT_TOKENS, threads=THREADS)
        self.batch: Any = self.lib.llama_batch_init(BATCH_TOKENS, 0, 1)
        self.prompts = ChatPrompts.for_model(self.model, lambda text: tokenize(self.model, text))

    def _decode(self, rows: list[tuple[int, int, int]]) -> None:
        """One decode of (slot, token, position) rows, logits for the last row of each slot."""
        batch = self.batch
        batch.n_tokens = len(rows)
        for i, (slot, token, position) in enumerate(rows):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.seq_id[i][0] = token, position, 1, slot
            batch.logits[i] = i == len(rows) - 1 or rows[i + 1][0] != slot
        if self.lib.llama_decode(self.context.ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")

    def run(self, requests: list[ChatRequest], in_flight: int) -> tuple[float, list[str], int]:
        """Seconds, texts and output tokens of `requests` with up to `in_flight` sequences at once."""
        lib, vocab, memory = self.lib, self.model.vocab, self.context.memory
        assert self.prompts is not None
        waiting = deque((i, self.prompts.generation(r)) for i, r in enumerate(requests))
        free = list(range(in_flight - 1, -1, -1))  # the lowest first: see the class docstring
        active: dict[int, list[Any]] = {}  # slot -> [request index, generation, sampler, tokens, position]
        texts = [""] * len(requests)
        produced = 0

        def take(slot: int, token: int) -> None:
            nonlocal produced
            index, generation, sampler, tokens, _ = active[slot]
            if not lib.llama_vocab_is_eog(vocab, token):
                tokens.append(token)
            if lib.llama_vocab_is_eog(vocab, token) or len(tokens) >= generation.max_tokens:
                texts[index] = b"".join(token_piece(lib, vocab, t) for t in tokens).decode("utf-8", errors="ignore")
                produced += len(tokens)
                sampler.close()
                del active[slot]
                free.append(slot)
                free.sort(reverse=True)

        started = time.perf_counter()
        while waiting or active:
            while waiting and free:
                index, generation = waiting.popleft()
                slot = free.pop()
                lib.llama_memory_seq_rm(memory, slot, -1, -1)
                prompt = generation.prompt
                for start in range(0, len(prompt), BATCH_TOKENS):
                    self._decode([(slot, t, start + k) for k, t in enumerate(prompt[start : start + BATCH_TOKENS])])
                sampler = SamplerChain(lib, self.model, generation.temperature, generation.seed, None)
                active[slot] = [index, generation, sampler, [], len(prompt)]
                take(slot, sampler.sample(self.context.ctx, self.batch.n_tokens - 1))
            if not active:
                continue
            slots = sorted(active)
            self._decode([(slot, active[slot][3][-1], active[slot][4]) for slot in slots])
            for i, slot in enumerate(slots):
                active[slot][4] += 1
                take(slot, active[slot][2].sample(self.context.ctx, i))
        return time.perf_counter() - started, texts, produced

    def close(self) -> None:
        self.lib.llama_batch_free(self.batch)
        self.context.close()
        self.model.close()


async def drive(backend: Any, requests: list[ChatRequest], in_flight: int) -> tuple[float, list[Completion]]:
    """Seconds and replies of `requests` sent to `backend` (anything with ``complete``), `in_flight` at a time."""
    slots = asyncio.Semaphore(in_flight)

    async def one(request: ChatRequest) -> Completion:
        async with slots:
            reply: Completion = await backend.complete(request)
            return reply

    started = time.perf_counter()
    replies = await asyncio.gather(*(one(r) for r in requests))
    return time.perf_counter() - started, list(replies)


class RayCaller:
    """A Ray actor that calls the node's model host as a role actor does (`LocalClient`)."""

    def __init__(self, path: str) -> None:
        self.client = LocalClient(path)

    async def run(self, requests: bytes, in_flight: int) -> bytes:
        elapsed, replies = await drive(self.client, msgspec.msgpack.decode(requests, type=list[ChatRequest]), in_flight)
        return msgspec.msgpack.encode((elapsed, replies))


def through_ray(caller: Any, requests: list[ChatRequest], in_flight: int) -> tuple[float, list[Completion]]:
    import ray

    reply = ray.get(caller.run.remote(msgspec.msgpack.encode(requests), in_flight))
    elapsed, replies = msgspec.msgpack.decode(reply, type=tuple[float, list[Completion]])
    return elapsed, replies


def outcome(elapsed: float, replies: list[Completion]) -> tuple[float, list[str], int]:
    return elapsed, [r.text for r in replies], sum(r.usage.output_tokens for r in replies)


PATHS = ("llama.cpp seq", "llama.cpp batch", "host", "on Ray")


def measure(name: str, path: str) -> list[tuple[float, list[str], int, int]]:
    """Every row on the path `name`: seconds, texts, output tokens and prompt tokens reused. `main` runs it in
    a process of its own, so that no path shares its threads (and llama.cpp's) with another."""
    reused: Any = lambda: 0  # noqa: E731
    if name == "llama.cpp batch":
        raw = RawBatched(path, DEFAULT_PARALLEL)
        run, close = lambda requests, level: raw.run(requests, min(level, DEFAULT_PARALLEL)), raw.close
    elif name == "on Ray":
        import ray

        ray.init(address="local", num_cpus=THREADS, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        caller = ray.remote(num_cpus=0)(RayCaller).remote(path)
        run, close = lambda requests, level: outcome(*through_ray(caller, requests, level)), ray.shutdown
    else:
        host = LocalModelHost(path, threads=THREADS, parallel=DEFAULT_PARALLEL, batched=name == "host")
        run, reused, close = (
            lambda r, level: outcome(*asyncio.run(drive(host, r, level))),
            host.prefix_tokens_reused,
            host.close,
        )
    run(requests_for(1, first=0)[:1], 1)  # the model loads outside the timings
    results, first = [], 1
    for level, shared in ROWS:
        requests = requests_for(level, first=first, shared=shared)
        first += len(requests)
        before = reused()
        results.append((*run(requests, level), reused() - before))
    close()
    return results


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--path":  # a child of the run below
        print(json.dumps(measure(sys.argv[2], str(embedded_model_path()))))
        return
    by_path = {}
    for name in PATHS:
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        child = subprocess.run([sys.executable, __file__, "--path", name], capture_output=True, text=True, check=False)
        if child.returncode != 0:
            raise SystemExit(f"the {name} path failed:\n{child.stderr[-3000:]}")
        by_path[name] = json.loads(child.stdout.strip().splitlines()[-1])
    print(
        f"{'in flight':>16} {'calls':>5} {'llama.cpp seq':>13} {'llama.cpp batch':>15} {'host':>6} {'on Ray':>6}"
        f" {'host/seq':>8} {'host/raw':>8} {'ray/raw':>7} {'same text':>9}  (output tokens/s)"
    )
    rows = []
    for i, (level, shared) in enumerate(ROWS):
        seq, raw, host, ray_ = (by_path[name][i] for name in PATHS)
        rate = {name: by_path[name][i][2] / by_path[name][i][0] for name in PATHS}
        r = {
            "in_flight": f"{level}, shared prefix" if shared else level,
            "calls": len(host[1]),
            **{f"{name} tokens/s": round(rate[name], 1) for name in PATHS},
            "host/seq": round(rate["host"] / rate["llama.cpp seq"], 2),
            "host/raw": round(rate["host"] / rate["llama.cpp batch"], 2),
            "ray/raw": round(rate["on Ray"] / rate["llama.cpp batch"], 2),
            "same_text": seq[1] == raw[1] == host[1] == ray_[1],
            "prefix_tokens_reused": host[3],
        }
        rows.append(r)
        print(
            f"{r['in_flight']!s:>16} {r['calls']:>5} {r['llama.cpp seq tokens/s']:>13}"
            f" {r['llama.cpp batch tokens/s']:>15} {r['host tokens/s']:>6} {r['on Ray tokens/s']:>6}"
            f" {r['host/seq']:>8} {r['host/raw']:>8} {r['ray/raw']:>7} {r['same_text']!s:>9}"
            + (f"  prefix reused: {host[3]} tokens" if host[3] else "")
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
