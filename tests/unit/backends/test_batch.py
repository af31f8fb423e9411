"""``--batch``: the collector that gathers calls into provider batches, on an in-memory batch API.

The real SDKs against a server speaking both providers' batch wire formats: test_batch_http.py; a whole run,
resumed after its driver is killed: tests/integration/test_batch_run.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from redraft.backends._batch import BatchCollector, BatchedBackend, BatchedSpec, BatchSettings
from redraft.backends._batch_apis import Answer, LineFailure, Listed
from redraft.backends._batch_journal import BatchJournal
from redraft.backends.base import ChatRequest, Completion
from redraft.backends.cache import ResponseCache
from redraft.backends.openai import OpenAISpec
from redraft.backends.pricing import default_prices
from redraft.errors import PermanentBackendError
from redraft.protocols.messages import ChatMessage, Usage
from redraft.services import IN_PROCESS

SPEC = OpenAISpec(model="gpt-4o-mini", spec="openai:gpt-4o-mini")
FAST = BatchSettings(gather_s=0.05, max_gather_s=1.0, first_poll_s=0.01, max_poll_s=0.02)


def request(text: str) -> ChatRequest:
    return ChatRequest(messages=[ChatMessage(role="user", content=text)], seed=1)


def answer_of(line: bytes) -> Completion:
    prompt = json.loads(line)["body"]["messages"][0]["content"]
    usage = Usage(input_tokens=1000, output_tokens=500, calls=1)
    return Completion(text=f"re: {prompt}", usage=usage, model="gpt-4o-mini", finish_reason="stop", latency_s=0)


class MemoryBatches:
    """A batch API in memory: each batch ends once `ends` says so; `fail` picks a status for a line. It keeps
    each batch's metadata, or none (``keeps_metadata`` False: Anthropic's)."""

    def __init__(self, max_lines: int = 1000, *, keeps_metadata: bool = True) -> None:
        self.max_lines, self.max_bytes = max_lines, 10**9
        self.keeps_metadata = keeps_metadata
        self.sent: dict[str, list[bytes]] = {}
        self.metadata: dict[str, dict[str, str]] = {}
        self.created: dict[str, float] = {}
        self.cancelled: list[str] = []
        self.ends: Callable[[str], bool] = lambda batch_id: True
        self.fail: Callable[[str, int], int | None] = lambda custom_id, attempt: None
        self.tries: dict[str, int] = {}

    def line(self, custom_id: str, request: ChatRequest) -> bytes:
        body = {"messages": [{"role": m.role, "content": m.content} for m in request.messages]}
        return json.dumps({"custom_id": custom_id, "body": body}).encode()

    async def submit(self, lines: list[bytes], metadata: dict[str, str]) -> str:
        batch_id = f"batch_{len(self.sent)}"
        self.sent[batch_id] = lines
        self.metadata[batch_id] = metadata
        self.created[batch_id] = time.time()
        return batch_id

    async def listed(self, since: float) -> list[Listed]:
        newest_first = sorted(self.sent, key=lambda b: -self.created[b])
        return [
            Listed(b, self.created[b], self.metadata[b] if self.keeps_metadata else None)
            for b in newest_first
            if self.created[b] >= since
        ]

    async def ended(self, batch_id: str) -> bool:
        return batch_id in self.cancelled or self.ends(batch_id)

    async def results(self, batch_id: str, submitted_at: float) -> dict[str, Answer]:
        answers: dict[str, Answer] = {}
        for line in self.sent[batch_id]:
            custom_id = json.loads(line)["custom_id"]
            if batch_id in self.cancelled and not self.ends(batch_id):
                answers[custom_id] = LineFailure("cancelled", "cancelled")
                continue
            self.tries[custom_id] = self.tries.get(custom_id, 0) + 1
            status = self.fail(custom_id, self.tries[custom_id])
            answers[custom_id] = LineFailure("status", f"HTTP {status}", status) if status else answer_of(line)
        return answers

    async def cancel(self, batch_id: str) -> None:
        self.cancelled.append(batch_id)


def backend_with(api: MemoryBatches, tmp_path: Path, settings: BatchSettings = FAST) -> BatchedBackend:
    """A role's batched backend whose collector (in this process) sends to ``api``."""
    name = f"collector-{id(api)}"
    journal = str(tmp_path / "batches.jsonl")
    IN_PROCESS.objects[name] = BatchCollector(SPEC, journal, settings, api=api)
    return BatchedBackend(BatchedSpec(SPEC, name, journal, settings))


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


async def test_calls_made_together_go_out_as_one_batch_priced_at_half(tmp_path: Path) -> None:
    api = MemoryBatches()
    backend = backend_with(api, tmp_path)
    completions = await asyncio.gather(*(backend.complete(request(f"task {i}")) for i in range(12)))
    assert [c.text for c in completions] == [f"re: task {i}" for i in range(12)]
    assert [len(lines) for lines in api.sent.values()] == [12]
    assert all(c.usage.batch_calls == 1 for c in completions)
    online = default_prices().cost("gpt-4o-mini", completions[0].usage - Usage(batch_calls=1))
    assert default_prices().cost("gpt-4o-mini", completions[0].usage) == pytest.approx(online / 2)
    assert BatchJournal(tmp_path / "batches.jsonl", SPEC.spec).open_batches() == {}  # every answer handed over


async def test_a_batch_stays_within_the_providers_line_limit(tmp_path: Path) -> None:
    api = MemoryBatches(max_lines=4)
    backend = backend_with(api, tmp_path)
    await asyncio.gather(*(backend.complete(request(f"task {i}")) for i in range(10)))
    assert sorted(len(lines) for lines in api.sent.values()) == [2, 4, 4]


async def test_a_line_that_failed_with_5xx_is_sent_again_in_a_later_batch_and_a_400_fails_the_call(
    tmp_path: Path,
) -> None:
    api = MemoryBatches()
    flaky = {}

    def fail(custom_id: str, attempt: int) -> int | None:
        prompt = flaky.get(custom_id)
        if prompt == "flaky" and attempt == 1:
            return 500
        return 400 if prompt == "bad" else None

    api.fail = fail
    backend = backend_with(api, tmp_path)
    collector = IN_PROCESS.objects[f"collector-{id(api)}"]
    for text in ("flaky", "bad", "fine"):
        flaky[ResponseCache.key(SPEC.spec, request(text))] = text
    results = await asyncio.gather(
        *(backend.complete(request(t)) for t in ("flaky", "bad", "fine")), return_exceptions=True
    )
    assert [getattr(r, "text", None) for r in results] == ["re: flaky", None, "re: fine"]
    assert isinstance(results[1], PermanentBackendError) and "HTTP 400" in str(results[1])
    assert [len(lines) for lines in api.sent.values()] == [3, 1]  # only the 500 went again
    assert collector._open == {}


async def test_a_batch_past_its_wait_is_cancelled_and_its_calls_are_made_online(tmp_path: Path) -> None:
    api = MemoryBatches()
    api.ends = lambda batch_id: False  # never ends by itself
    backend = backend_with(api, tmp_path, msgspec.structs.replace(FAST, wait_s=0.1))

    class Online:
        calls = 0

        async def complete(self, request: ChatRequest) -> Completion:
            Online.calls += 1
            usage = Usage(input_tokens=1000, output_tokens=500, calls=1)
            return Completion(text="online", usage=usage, model="gpt-4o-mini", finish_reason="stop", latency_s=0)

    backend._online = Online()
    completions = await asyncio.gather(*(backend.complete(request(f"task {i}")) for i in range(3)))
    assert [c.text for c in completions] == ["online"] * 3
    assert all(c.usage.batch_calls == 0 for c in completions)  # priced at the online price
    assert api.cancelled == ["batch_0"] and Online.calls == 3


async def test_a_restarted_collector_follows_the_batch_it_had_sent_and_never_sends_it_again(tmp_path: Path) -> None:
    api = MemoryBatches()
    released = asyncio.Event()
    api.ends = lambda batch_id: released.is_set()
    journal = str(tmp_path / "batches.jsonl")
    first = BatchCollector(SPEC, journal, FAST, api=api)
    calls = [asyncio.ensure_future(first.complete(request(f"task {i}"))) for i in range(3)]
    while not api.sent:
        await asyncio.sleep(0.01)
    for call in calls:  # the driver dies with its collector: the batch stays at the provider
        call.cancel()
    for task in first._followers:
        task.cancel()
    assert list(BatchJournal(Path(journal), SPEC.spec).open_batches()) == ["batch_0"]

    second = BatchCollector(SPEC, journal, FAST, api=api)
    assert await second.resume() == 1
    released.set()
    answers = await asyncio.gather(*(second.complete(request(f"task {i}")) for i in (2, 0, 1)))
    assert [a.text for a in answers if isinstance(a, Completion)] == ["re: task 2", "re: task 0", "re: task 1"]
    assert list(api.sent) == ["batch_0"]  # nothing sent twice
    assert BatchJournal(Path(journal), SPEC.spec).open_batches() == {}


async def test_stopping_cancels_the_open_batches_and_a_resume_reads_what_they_finished(tmp_path: Path) -> None:
    api = MemoryBatches()
    api.ends = lambda batch_id: False
    journal = str(tmp_path / "batches.jsonl")
    collector = BatchCollector(SPEC, journal, FAST, api=api)
    waiting = asyncio.ensure_future(collector.complete(request("task")))
    while not api.sent:
        await asyncio.sleep(0.01)
    assert await collector.cancel_open() == 1
    assert api.cancelled == ["batch_0"]
    got = await waiting
    assert isinstance(got, LineFailure) and got.kind == "cancelled"
    late = await collector.complete(request("a retry after the stop"))
    assert isinstance(late, LineFailure) and late.kind == "cancelled" and len(api.sent) == 1  # nothing more sent
    assert list(BatchJournal(Path(journal), SPEC.spec).open_batches()) == ["batch_0"]  # a resume reads it


def test_the_journal_skips_a_line_torn_by_a_crash_and_other_endpoints(tmp_path: Path) -> None:
    path = tmp_path / "batches.jsonl"
    BatchJournal(path, "anthropic:claude-haiku-4-5").submitted("msgbatch_1", ["a"], 1.0)
    journal = BatchJournal(path, SPEC.spec)
    journal.submitted("batch_1", ["k1", "k2"], 2.0)
    journal.submitted("batch_2", ["k3"], 3.0)
    journal.ended("batch_1")
    with open(path, "ab") as out:
        out.write(b'{"endpoint": "openai:gpt-4o-mini", "submi')
    assert journal.open_batches() == {"batch_2": (["k3"], 3.0)}


async def test_a_batch_the_provider_no_longer_knows_is_sent_again_and_a_refused_one_fails_its_calls(
    tmp_path: Path,
) -> None:
    api = MemoryBatches()
    lost = {"batch_0"}

    async def ended(batch_id: str) -> bool:
        if batch_id in lost:
            raise PermanentBackendError("openai:gpt-4o-mini: HTTP 404: No batch found")
        return True

    api.ended = ended  # type: ignore[method-assign]
    backend = backend_with(api, tmp_path)
    answers = await asyncio.gather(*(backend.complete(request(f"task {i}")) for i in range(2)))
    assert [a.text for a in answers] == ["re: task 0", "re: task 1"]
    lines = [line for sent in api.sent.values() for line in sent]
    assert len(lines) == 2 + len(api.sent["batch_0"])  # the lost batch's calls sent again, once each

    async def refuse(lines: list[bytes], metadata: dict[str, str]) -> str:
        raise PermanentBackendError("openai:gpt-4o-mini: HTTP 400: the input file is not valid JSONL")

    api.submit = refuse  # type: ignore[method-assign]
    with pytest.raises(PermanentBackendError, match="not valid JSONL"):
        await backend.complete(request("another"))


def test_batch_is_refused_when_no_model_of_the_run_has_a_batch_api() -> None:
    from redraft import RunConfig
    from redraft.engine.resolution import resolve_run
    from redraft.errors import UserError

    with pytest.raises(UserError, match=r"this run's models \(local\) have none: run it without --batch"):
        resolve_run(RunConfig.build(scenario="arithmetic", batch=True))
    compatible = "openai-compatible:m@http://127.0.0.1:9/v1"
    with pytest.raises(UserError, match="have none"):
        resolve_run(RunConfig.build(scenario="arithmetic", model=compatible, batch=True))
    setup = resolve_run(RunConfig.build(scenario="arithmetic", drafter="openai:gpt-4o-mini", batch=True)).setup
    assert setup.drafter.spec == "openai:gpt-4o-mini"  # one role with a batch API is enough; the rest run online
