"""`FakeLLMServer`'s batch APIs, driven by the real async openai and anthropic SDKs.

What a batch line answers must be what the online endpoint answers for the same body (a backend's results must
not depend on which way it asked), the lines `batch_fail` picks must fail and no others, and a held batch must
still cancel. The SDKs parse every answer into their own models, so a field they require and the fake left out
fails here.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anthropic
import openai
import pytest
from openai.types.chat import ChatCompletion

from tests.support.fake_llm_servers import FakeLLMServer, Fault, SeenBatch

T = TypeVar("T")
POLL_S = 0.05


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        fake.batch_delay_s = 0.2
        yield fake


def openai_client(server: FakeLLMServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)


def anthropic_client(server: FakeLLMServer) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=server.anthropic_base_url, api_key="test", max_retries=0)


async def poll(get: Callable[[], Awaitable[T]], done: Callable[[T], bool], timeout_s: float = 5.0) -> list[T]:
    """Every state seen, every `POLL_S`, up to the first that is `done`."""
    seen, deadline = [await get()], time.monotonic() + timeout_s
    while not done(seen[-1]):
        assert time.monotonic() < deadline, f"not done after {timeout_s} s: {seen[-1]}"
        await asyncio.sleep(POLL_S)
        seen.append(await get())
    return seen


def chat_body(i: int) -> dict[str, Any]:
    return {"model": "gpt-test", "messages": [{"role": "user", "content": f"question {i}"}], "max_tokens": 16}


def messages_params(i: int) -> dict[str, Any]:
    return {"model": "claude-test", "max_tokens": 16, "messages": [{"role": "user", "content": f"question {i}"}]}


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def parse_jsonl(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


async def upload(client: openai.AsyncOpenAI, bodies: dict[str, dict[str, Any]]) -> str:
    lines = [{"custom_id": k, "method": "POST", "url": "/v1/chat/completions", "body": b} for k, b in bodies.items()]
    content = jsonl(lines)
    uploaded = await client.files.create(file=("requests.jsonl", content), purpose="batch")
    assert (uploaded.object, uploaded.purpose, uploaded.status) == ("file", "batch", "processed")
    assert (uploaded.filename, uploaded.bytes) == ("requests.jsonl", len(content))
    assert uploaded.id.startswith("file-")
    assert (await client.files.content(uploaded.id)).content == content  # byte for byte, through the multipart
    return uploaded.id


# ---------------------------------------------------------------- OpenAI


async def test_openai_batch_answers_as_online_and_fails_the_chosen_lines(server: FakeLLMServer) -> None:
    server.reply_for = lambda body: f"answer to {body['messages'][-1]['content']}"
    chosen = {"q1": 500, "q3": 400}
    server.batch_fail = lambda custom_id, body: chosen.get(custom_id)
    client = openai_client(server)
    bodies = {f"q{i}": chat_body(i) for i in range(5)}

    input_file_id = await upload(client, bodies)
    created = await client.batches.create(
        input_file_id=input_file_id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"run": "r1"},
    )
    assert (created.object, created.status, created.endpoint) == ("batch", "in_progress", "/v1/chat/completions")
    assert (created.input_file_id, created.completion_window, created.metadata) == (input_file_id, "24h", {"run": "r1"})
    assert created.id.startswith("batch_") and created.output_file_id is None and created.errors is None
    assert created.expires_at == created.created_at + 24 * 3600
    states = await poll(lambda: client.batches.retrieve(created.id), lambda b: b.status != "in_progress")
    assert len(states) >= 2, "in progress for batch_delay_s before it is done"
    done = states[-1]
    assert done.status == "completed" and done.completed_at is not None
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (5, 3, 2)
    assert done.output_file_id and done.error_file_id
    assert server.batch_requests and not server.requests, "the batch APIs' calls are not chat requests"
    assert server.batches == [SeenBatch("openai", created.id, list(bodies), cancelled=False, metadata={"run": "r1"})]
    assert server.batch_lines_answered == 3

    output = parse_jsonl((await client.files.content(done.output_file_id)).content)
    errors = parse_jsonl((await client.files.content(done.error_file_id)).content)
    assert [line["custom_id"] for line in output] == ["q0", "q2", "q4"]
    assert {line["custom_id"]: line["response"]["status_code"] for line in errors} == chosen
    for line in errors:
        assert line["id"].startswith("batch_req_") and line["error"] is None
        assert line["response"]["body"]["error"]["message"]
    assert errors[0]["response"]["body"]["error"]["type"] == "server_error"
    assert errors[1]["response"]["body"]["error"]["type"] == "invalid_request_error"
    for line in output:
        assert line["id"].startswith("batch_req_") and line["error"] is None
        assert line["response"]["status_code"] == 200 and line["response"]["request_id"]
        in_batch = ChatCompletion.model_validate(line["response"]["body"])
        online = await client.chat.completions.create(**bodies[line["custom_id"]])
        assert in_batch.choices[0].message.content == f"answer to question {line['custom_id'][1:]}"
        assert in_batch.choices == online.choices and in_batch.usage == online.usage
    assert len(server.requests) == 3 == server.batch_lines_answered  # only the online calls above


async def test_openai_cancel_of_a_held_batch(server: FakeLLMServer) -> None:
    server.batch_hold, server.batch_delay_s = True, 0.0
    client = openai_client(server)
    bodies = {"a": chat_body(1), "b": chat_body(2)}
    batch = await client.batches.create(
        input_file_id=await upload(client, bodies), endpoint="/v1/chat/completions", completion_window="24h"
    )
    await asyncio.sleep(3 * POLL_S)
    assert (await client.batches.retrieve(batch.id)).status == "in_progress", "held: never done"

    cancelling = await client.batches.cancel(batch.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at is not None
    cancelled = await client.batches.retrieve(batch.id)
    assert cancelled.status == "cancelled" and cancelled.cancelled_at is not None
    assert cancelled.output_file_id is None, "a held batch answered no line"
    assert cancelled.request_counts is not None and cancelled.request_counts.completed == 0
    assert cancelled.error_file_id
    errors = parse_jsonl((await client.files.content(cancelled.error_file_id)).content)
    assert [(e["custom_id"], e["response"], e["error"]["code"]) for e in errors] == [
        ("a", None, "batch_cancelled"),
        ("b", None, "batch_cancelled"),
    ]
    assert server.batches == [SeenBatch("openai", batch.id, ["a", "b"], cancelled=True)]
    assert server.batch_lines_answered == 0
    with pytest.raises(openai.ConflictError, match="Cannot cancel a batch with status 'cancelled'"):
        await client.batches.cancel(batch.id)


async def test_openai_batch_api_faults_and_a_refused_input_file(server: FakeLLMServer) -> None:
    client = openai_client(server)
    file_id = await upload(client, {"a": chat_body(1)})
    server.script(Fault.server_error())
    with pytest.raises(openai.InternalServerError):
        await client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    assert server.batches == [] and server.requests == []
    with pytest.raises(openai.NotFoundError):
        await client.batches.retrieve("batch_unknown")

    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": chat_body(1)}
    twice = await client.files.create(file=("twice.jsonl", jsonl([line, line])), purpose="batch")
    failed = await client.batches.create(
        input_file_id=twice.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert failed.status == "failed" and failed.errors and failed.errors.data
    assert [(e.code, e.line) for e in failed.errors.data] == [("duplicate_custom_id", 2)]


# ---------------------------------------------------------------- Anthropic


async def test_anthropic_batch_results_succeeded_and_errored(server: FakeLLMServer) -> None:
    chosen = {"m1": 529, "m2": 500, "m4": 400}
    server.batch_fail = lambda custom_id, params: chosen.get(custom_id)
    client = anthropic_client(server)
    params = {f"m{i}": messages_params(i) for i in range(5)}

    created = await client.messages.batches.create(requests=[{"custom_id": k, "params": p} for k, p in params.items()])
    assert (created.type, created.processing_status, created.results_url) == ("message_batch", "in_progress", None)
    assert created.id.startswith("msgbatch_") and created.ended_at is None and created.cancel_initiated_at is None
    assert created.request_counts.processing == 5 and created.created_at.tzinfo is not None
    with pytest.raises(anthropic.AnthropicError, match="No `results_url`"):
        await client.messages.batches.results(created.id)  # not ended yet

    states = await poll(lambda: client.messages.batches.retrieve(created.id), lambda b: b.processing_status == "ended")
    assert len(states) >= 2
    ended = states[-1]
    assert ended.results_url == f"{server.url}/v1/messages/batches/{created.id}/results"
    assert ended.ended_at is not None and ended.ended_at >= ended.created_at
    counts = ended.request_counts
    assert (counts.processing, counts.succeeded, counts.errored, counts.canceled) == (0, 2, 3, 0)
    assert server.batches == [SeenBatch("anthropic", created.id, list(params), cancelled=False)]
    assert server.batch_lines_answered == 2 and not server.requests

    results = {r.custom_id: r.result async for r in await client.messages.batches.results(created.id)}
    assert list(results) == list(params)
    errored = {k: r.error.error.type for k, r in results.items() if r.type == "errored"}
    assert errored == {"m1": "overloaded_error", "m2": "api_error", "m4": "invalid_request_error"}
    for custom_id in ("m0", "m3"):
        result = results[custom_id]
        assert result.type == "succeeded"
        online = await client.messages.create(**params[custom_id])
        assert result.message.content == online.content and result.message.usage == online.usage
        assert result.message.content[0].type == "text" and result.message.content[0].text == server.reply_text
    assert len(server.requests) == 2 == server.batch_lines_answered


async def test_anthropic_cancel_of_a_held_batch(server: FakeLLMServer) -> None:
    server.batch_hold = True
    client = anthropic_client(server)
    created = await client.messages.batches.create(
        requests=[{"custom_id": k, "params": messages_params(i)} for i, k in enumerate(["x", "y", "z"])]
    )
    await asyncio.sleep(server.batch_delay_s + 2 * POLL_S)
    assert (await client.messages.batches.retrieve(created.id)).processing_status == "in_progress", "held"

    canceling = await client.messages.batches.cancel(created.id)
    assert canceling.processing_status == "canceling" and canceling.cancel_initiated_at is not None
    assert canceling.request_counts.processing == 3
    ended = await client.messages.batches.retrieve(created.id)
    assert ended.processing_status == "ended" and ended.results_url
    assert (ended.request_counts.canceled, ended.request_counts.succeeded, ended.request_counts.processing) == (3, 0, 0)
    results = [(r.custom_id, r.result.type) async for r in await client.messages.batches.results(created.id)]
    assert results == [("x", "canceled"), ("y", "canceled"), ("z", "canceled")]
    assert server.batches == [SeenBatch("anthropic", created.id, ["x", "y", "z"], cancelled=True)]
    assert server.batch_lines_answered == 0


# ---------------------------------------------------------------- listing, as a resume reads it


async def test_openai_lists_batches_newest_first_page_by_page_with_their_metadata(server: FakeLLMServer) -> None:
    client = openai_client(server)
    made = []
    for i in range(5):
        file_id = await upload(client, {f"k{i}": chat_body(i)})
        batch = await client.batches.create(
            input_file_id=file_id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"redraft_run": f"run-{i % 2}"},
        )
        made.append(batch.id)
    first = await client.batches.list(limit=2)
    assert [b.id for b in first.data] == made[::-1][:2] and first.has_more
    listed = [b async for b in client.batches.list(limit=2)]  # the SDK follows the `after` cursor
    assert [b.id for b in listed] == made[::-1]
    assert [b.metadata for b in listed] == [{"redraft_run": f"run-{i % 2}"} for i in reversed(range(5))]
    assert [b.metadata for b in server.batches] == [{"redraft_run": f"run-{i % 2}"} for i in range(5)]
    with pytest.raises(openai.BadRequestError):
        await client.batches.list(limit=101)


async def test_anthropic_lists_message_batches_newest_first_both_ways(server: FakeLLMServer) -> None:
    client = anthropic_client(server)
    server.batch_hold = True  # in progress while listed, however slow the machine (0.2 s passed under load)
    made = []
    for i in range(5):
        batch = await client.messages.batches.create(
            requests=[{"custom_id": f"k{i}", "params": messages_params(i)}]  # type: ignore[list-item]
        )
        made.append(batch.id)
    listed = [b async for b in client.messages.batches.list(limit=2)]  # the SDK follows `after_id`
    assert [b.id for b in listed] == made[::-1]
    assert all(b.processing_status == "in_progress" for b in listed)
    older = await client.messages.batches.list(limit=2, after_id=made[3])
    assert [b.id for b in older.data] == [made[2], made[1]] and older.has_more
    newer = await client.messages.batches.list(limit=2, before_id=made[1])
    assert [b.id for b in newer.data] == [made[3], made[2]] and newer.has_more
    assert all(seen.metadata is None for seen in server.batches)  # Anthropic keeps none
