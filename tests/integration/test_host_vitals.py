"""The embedded model's host accounts for itself (`LocalModelHost.vitals`): the calls it finished, the tokens it
made (the same count its completions report), the wall time it had calls to serve and its process's CPU time;
on both paths, batched and sequential. The driver's progress line reads its decode rate and core share off them."""

from __future__ import annotations

import asyncio

import pytest

from redraft.backends.base import ChatRequest, Completion
from redraft.backends.local import LocalModelHost, embedded_model_path
from redraft.protocols.messages import ChatMessage

pytestmark = pytest.mark.model


def ask(content: str, seed: int) -> ChatRequest:
    return ChatRequest(messages=[ChatMessage(role="user", content=content)], max_tokens=16, seed=seed)


@pytest.mark.parametrize("batched", [True, False])
def test_the_host_counts_its_calls_tokens_busy_time_and_cpu(batched: bool) -> None:
    host = LocalModelHost(str(embedded_model_path()), threads=2, parallel=2, ctx_per_seq=512, batched=batched)
    try:
        before = host.vitals()
        assert (before.calls, before.tokens, before.busy_s) == (0, 0, 0.0)

        async def together() -> list[Completion]:
            return list(await asyncio.gather(*(host.complete(ask(f"Count to {n}.", n)) for n in (3, 4))))

        done = asyncio.run(together())
        after = host.vitals()
    finally:
        host.close()
    assert after.calls == 2
    assert after.tokens == sum(c.usage.output_tokens for c in done) > 0
    assert 0 < after.busy_s <= after.at - before.at
    assert after.cpu_s > before.cpu_s
    assert after.model == embedded_model_path().name and after.threads == 2
