"""The embedded model's host decodes with fewer threads while other work crowds the cores
(`redraft.backends._llama_threads`), and a call's text does not depend on how many threads made it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import pytest

from redraft.backends import _llama_threads as threads_module
from redraft.backends.base import ChatRequest, Completion
from redraft.backends.local import LocalModelHost, embedded_model_path
from redraft.protocols.messages import ChatMessage

pytestmark = pytest.mark.model


def ask(seed: int, max_tokens: int = 48) -> ChatRequest:
    content = "Write a short poem about a lighthouse."
    return ChatRequest(messages=[ChatMessage(role="user", content=content)], max_tokens=max_tokens, seed=seed)


def complete(host: LocalModelHost, requests: list[ChatRequest]) -> list[Completion]:
    async def together() -> list[Completion]:
        return list(await asyncio.gather(*(host.complete(r) for r in requests)))

    return asyncio.run(together())


def test_a_call_gives_the_same_text_whatever_threads_decode_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The governor may change the count at any step; the tokens must not change with it (a result that depended
    on the machine's load would not be reproducible, nor answerable from the cache)."""
    requests = [ask(seed) for seed in (1, 2, 3)]
    steady = LocalModelHost(str(embedded_model_path()), threads=2, parallel=3, ctx_per_seq=512)
    flipping = LocalModelHost(str(embedded_model_path()), threads=2, parallel=3, ctx_per_seq=512)
    try:
        alone = complete(steady, requests)
        engine: Any = flipping._load_engine()
        governor = engine[0].governor
        monkeypatch.setattr(threads_module, "WINDOW_S", 0.0)  # every decode ends a window: 2, 1, 2, 1, ...
        monkeypatch.setattr(governor, "_decide", lambda *_: governor._set(3 - governor.threads, trying=False))
        flipped = complete(flipping, requests)
    finally:
        steady.close()
        flipping.close()
    assert governor.changes > 40  # the count really changed, many times, through the scheduler's own setting
    assert [c.text for c in flipped] == [c.text for c in alone]
    assert all(c.usage.output_tokens > 20 for c in alone)


def test_beside_busy_processes_the_host_gives_up_threads_and_says_so() -> None:
    """As many busy loops as the machine has cores, at this process's priority: the decoding threads wait for
    cores, and the host halves them; its vitals say so (the progress line's "decodes with 1 of 2 threads")."""
    cores = os.cpu_count() or 1
    host = LocalModelHost(str(embedded_model_path()), threads=max(2, cores), parallel=2, ctx_per_seq=512)
    loops = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(cores)]
    try:
        for seed in range(40):  # each round of calls is a few seconds of decoding; a window is 3
            complete(host, [ask(seed, max_tokens=64), ask(seed + 100, max_tokens=64)])
            if host.vitals().threads < host.vitals().most_threads:
                break
        vitals = host.vitals()
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
        host.close()
    assert vitals.most_threads == max(2, cores)
    assert vitals.threads < vitals.most_threads
