"""Earning the providers' prompt caches, over real HTTP through the real SDKs: Anthropic's breakpoint on a long
enough stable prefix (and none below the model's minimum), OpenAI's ``prompt_cache_key``, both in batch lines
too; and the fake servers' caches, which the benchmark measures against, caching as the providers document."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import pytest

from redraft.backends._batch import BatchedBackend, BatchedSpec
from redraft.backends._retrying import RetryPolicy
from redraft.backends.anthropic import cache_minimum_tokens, parse_anthropic
from redraft.backends.base import ChatRequest
from redraft.backends.openai import parse_openai, parse_openai_compatible
from redraft.protocols.messages import ChatMessage
from tests.support.fake_llm_servers import FakeLLMServer, sdks_pointed_at
from tests.support.fake_prompt_cache import FakePromptCache
from tests.unit.backends.test_batch_http import FAST

KEY = "sk-test-cache-KEY"
RETRY = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02, jitter=False)
TASK = "Find the cause of the outage in these logs.\n" + "12:00:01 db timeout on shard 3\n" * 200  # ~6,400 chars


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with sdks_pointed_at(monkeypatch, KEY) as fake:
        fake.prompt_cache = FakePromptCache()
        yield fake


def asked(candidate: str, task: str = TASK) -> ChatRequest:
    """A critic's request: the system and the task stable, the candidate after them."""
    user = f"Task:\n{task}\n\nCandidate answer:\n{candidate}"
    return ChatRequest(
        messages=[ChatMessage(role="system", content="You review."), ChatMessage(role="user", content=user)],
        max_tokens=16,
        stable_chars=len(f"Task:\n{task}\n\n"),
        cache_key="redraft-task-1",
    )


def anthropic(model: str = "claude-sonnet-4-6") -> Any:
    return replace(parse_anthropic(model), retry=RETRY, timeout_s=5.0)


async def test_anthropic_marks_the_end_of_a_long_stable_prefix_and_reads_it_back_from_the_cache(
    server: FakeLLMServer,
) -> None:
    backend = anthropic().create()
    first = await backend.complete(asked("Answer: the disk"))
    second = await backend.complete(asked("Answer: the dusk"))  # as long as the first: as many tokens
    stable, changing = server.requests[0].body["messages"][0]["content"]
    assert stable == {"type": "text", "text": f"Task:\n{TASK}\n\n", "cache_control": {"type": "ephemeral"}}
    assert changing == {"type": "text", "text": "Candidate answer:\nAnswer: the disk"}
    assert server.requests[0].body["system"] == "You review."
    assert first.usage.cached_tokens == 0 and first.usage.cache_write_tokens > 1000
    assert second.usage.cached_tokens == first.usage.cache_write_tokens and second.usage.cache_write_tokens == 0
    assert second.usage.input_tokens == first.usage.input_tokens  # the reads and writes are part of the input


async def test_anthropic_sends_no_breakpoint_below_the_model_s_minimum(server: FakeLLMServer) -> None:
    short = "Add 2 and 2."
    await anthropic().create().complete(asked("Answer: 4", task=short))  # ~10 tokens, minimum 1,024
    haiku = "x" * (3 * 4 * 1024)  # ~3,000 tokens: above Sonnet's minimum, below Haiku 4.5's 4,096
    await anthropic("claude-haiku-4-5-20251001").create().complete(asked("Answer: 4", task=haiku))
    await anthropic("claude-sonnet-4-6").create().complete(asked("Answer: 4", task=haiku))
    small, under_haiku, over_sonnet = (r.body["messages"][0]["content"] for r in server.requests)
    assert isinstance(small, str) and isinstance(under_haiku, str)  # sent as before: one plain text
    assert over_sonnet[0]["cache_control"] == {"type": "ephemeral"}
    assert (cache_minimum_tokens("claude-haiku-4-5-20251001"), cache_minimum_tokens("claude-opus-4-1")) == (4096, 1024)
    unmarked = msgspec.structs.replace(asked("Answer: 4"), stable_chars=0)
    await anthropic().create().complete(unmarked)
    assert isinstance(server.requests[-1].body["messages"][0]["content"], str)


async def test_openai_sends_the_task_s_cache_key_and_a_compatible_server_is_not_sent_it(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await replace(parse_openai("gpt-4o-mini"), retry=RETRY).create().complete(asked("Answer: the disk"))
    second = await replace(parse_openai("gpt-4o-mini"), retry=RETRY).create().complete(asked("Answer: the db"))
    assert server.requests[0].body["prompt_cache_key"] == "redraft-task-1"
    assert first.usage.cached_tokens == 0 and 1024 <= second.usage.cached_tokens < second.usage.input_tokens
    compatible = replace(parse_openai_compatible(f"m@{server.openai_base_url}"), retry=RETRY)
    await compatible.create().complete(asked("Answer: 4"))
    assert "prompt_cache_key" not in server.requests[-1].body


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_batch_lines_carry_the_breakpoint_and_the_cache_key_as_online_requests_do(
    server: FakeLLMServer, provider: str, tmp_path: Path
) -> None:
    lines: list[dict[str, Any]] = []
    server.batch_fail = lambda custom_id, body: lines.append(body)  # type: ignore[func-returns-value]
    inner = replace(parse_openai("gpt-4o-mini"), retry=RETRY) if provider == "openai" else anthropic()
    backend = BatchedBackend(BatchedSpec(inner, f"cache-{provider}", str(tmp_path / "batches.jsonl"), FAST))
    answers = await asyncio.gather(*(backend.complete(asked(f"Answer: {n}")) for n in range(3)))
    await inner.create().complete(asked("Answer: 0"))
    online = server.requests[-1].body
    line = next(body for body in lines if "Answer: 0" in str(body["messages"]))
    assert line["messages"] == online["messages"] and len(lines) == 3
    if provider == "openai":
        assert line["prompt_cache_key"] == online["prompt_cache_key"] == "redraft-task-1"
    else:
        assert line["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert sum(a.usage.cached_tokens for a in answers) > 0  # the lines after the first read the cache
