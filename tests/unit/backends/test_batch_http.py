"""``--batch`` with the real openai and anthropic SDKs, against a server on 127.0.0.1 speaking both batch APIs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import msgspec
import pytest

from redraft.backends._batch import BatchCollector, BatchedBackend, BatchedSpec, BatchSettings
from redraft.backends._batch_journal import BatchJournal, BatchRun
from redraft.backends._retrying import RetryPolicy
from redraft.backends.anthropic import AnthropicSpec, parse_anthropic
from redraft.backends.base import ChatRequest, Completion
from redraft.backends.cache import ResponseCache
from redraft.backends.openai import OpenAISpec, parse_openai
from redraft.errors import PermanentBackendError
from redraft.protocols.messages import ChatMessage
from tests.support.fake_llm_servers import FakeLLMServer, sdks_pointed_at

KEY = "sk-test-batch-KEY"
FAST = BatchSettings(gather_s=0.05, max_gather_s=1.0, first_poll_s=0.02, max_poll_s=0.05)
RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.02, jitter=False)
PROVIDERS = ["openai", "anthropic"]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with sdks_pointed_at(monkeypatch, KEY) as fake:
        fake.model = "gpt-4o-mini"
        yield fake


def spec_of(provider: str) -> OpenAISpec | AnthropicSpec:
    if provider == "openai":
        return replace(parse_openai("gpt-4o-mini"), retry=RETRY, timeout_s=5.0)
    return replace(parse_anthropic("claude-haiku-4-5"), retry=RETRY, timeout_s=5.0)


def batched(provider: str, tmp_path: Path, settings: BatchSettings = FAST) -> BatchedBackend:
    inner = spec_of(provider)
    name = f"test-batches-{provider}-{tmp_path.name}"
    return BatchedBackend(BatchedSpec(inner, name, str(tmp_path / "batches.jsonl"), settings))


def request(text: str) -> ChatRequest:
    return ChatRequest(messages=[ChatMessage(role="user", content=text)], max_tokens=32, seed=7)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_rounds_calls_go_as_one_batch_and_read_as_the_online_answers(
    server: FakeLLMServer, provider: str, tmp_path: Path
) -> None:
    server.reply_for = lambda body: f"answer to {body['messages'][-1]['content']}"
    backend = batched(provider, tmp_path)
    texts = [f"task {i}" for i in range(5)]
    answers = await asyncio.gather(*(backend.complete(request(t)) for t in texts))
    [batch] = server.batches
    assert batch.provider == provider and len(batch.custom_ids) == 5
    assert server.batch_lines_answered == 5 and not server.requests  # nothing went online
    online = [await spec_of(provider).create().complete(request(t)) for t in texts]
    for got, expected in zip(answers, online, strict=True):
        assert (got.text, got.usage.input_tokens, got.usage.output_tokens) == (
            expected.text,
            expected.usage.input_tokens,
            expected.usage.output_tokens,
        )
        assert got.usage.batch_calls == 1 and expected.usage.batch_calls == 0
    if provider == "openai":  # the fake answers Anthropic's with one text whatever the request
        assert [a.text for a in answers] == [f"answer to {t}" for t in texts]
    assert BatchJournal(tmp_path / "batches.jsonl", spec_of(provider).spec).open_batches() == {}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_batch_that_partly_fails_sends_its_5xx_lines_again_and_fails_its_400s(
    server: FakeLLMServer, provider: str, tmp_path: Path
) -> None:
    inner = spec_of(provider)
    flaky, bad = (ResponseCache.key(inner.spec, request(t)) for t in ("flaky", "bad"))
    failed_once: set[str] = set()

    def fail(custom_id: str, body: object) -> int | None:
        if custom_id == bad:
            return 400
        if custom_id == flaky and custom_id not in failed_once:
            failed_once.add(custom_id)
            return 500
        return None

    server.batch_fail = fail
    backend = batched(provider, tmp_path)
    got = await asyncio.gather(
        *(backend.complete(request(t)) for t in ("flaky", "bad", "fine")), return_exceptions=True
    )
    assert isinstance(got[0], Completion) and isinstance(got[2], Completion)
    assert isinstance(got[1], PermanentBackendError)
    assert [b.custom_ids for b in server.batches][1:] == [[flaky]]  # only the 500 was sent again
    assert server.batch_lines_answered == 2


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_batch_that_never_ends_is_cancelled_at_its_wait_and_its_calls_made_online(
    server: FakeLLMServer, provider: str, tmp_path: Path
) -> None:
    server.batch_hold = True
    backend = batched(provider, tmp_path, msgspec.structs.replace(FAST, wait_s=0.3))
    answers = await asyncio.gather(*(backend.complete(request(f"task {i}")) for i in range(3)))
    [batch] = server.batches
    assert batch.cancelled
    assert len(server.requests) == 3 and server.batch_lines_answered == 0  # each call made online, once
    assert all(a.usage.batch_calls == 0 for a in answers)  # and priced online


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_deleted_journal_is_made_up_for_by_the_providers_list_and_no_line_is_billed_twice(
    server: FakeLLMServer, provider: str, tmp_path: Path
) -> None:
    server.batch_hold = True
    inner, journal = spec_of(provider), str(tmp_path / "batches.jsonl")
    ours, theirs = BatchRun(uid="run-a", since=time.time() - 60), BatchRun(uid="run-b", since=time.time() - 60)
    before = BatchCollector(inner, str(tmp_path / "theirs.jsonl"), FAST, theirs)
    await asyncio.wait_for(asyncio.shield(before.resume()), 5)
    elsewhere = asyncio.ensure_future(before.complete(request("another run's call")))
    while not server.batches:  # the other run's batch is out first (the order the metadata check reads)
        await asyncio.sleep(0.02)
    first = BatchCollector(inner, journal, FAST, ours)
    calls = [asyncio.ensure_future(first.complete(request(f"task {i}"))) for i in range(3)]
    while len(server.batches) < 2:
        await asyncio.sleep(0.02)
    for task in [*calls, *first._followers]:  # the driver dies; its batch stays out at the provider
        task.cancel()
    Path(journal).unlink()

    again = BatchCollector(inner, journal, FAST, msgspec.structs.replace(ours, journal_lost=True))
    # OpenAI keeps the run's id in each batch's metadata; an Anthropic batch is anyone's until its ids say.
    assert await again.resume() == (1 if provider == "openai" else 2)
    asked = [asyncio.ensure_future(again.complete(request(f"task {i}"))) for i in (1, 2, 0, 3)]
    await asyncio.sleep(0.3)
    assert len(server.batches) == 2  # held while batches whose keys are unknown are out
    server.batch_hold = False
    answers = await asyncio.wait_for(asyncio.gather(*asked, elsewhere), 30)
    assert all(isinstance(a, Completion) for a in answers)
    lines = [custom_id for batch in server.batches for custom_id in batch.custom_ids]
    assert len(lines) == len(set(lines)) == 5 and server.batch_lines_answered == 5
    assert server.batches[-1].custom_ids == [ResponseCache.key(inner.spec, request("task 3"))]
    if provider == "openai":
        assert [b.metadata and b.metadata["redraft_run"] for b in server.batches] == ["run-b", "run-a", "run-a"]
