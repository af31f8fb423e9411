"""redraft serve against a model server that fails, throttles or hangs, a client that goes away, and a server
stopped with requests in flight: an OpenAI-shaped answer every time, never a hang, and nothing paid for a loop
nobody waits for. The model is the suite's fake OpenAI-compatible server, over HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import openai
import pytest

from redraft.serving import ServeSettings
from tests.support.fake_llm_servers import FakeLLMServer
from tests.support.serving import served

ASK = [{"role": "user", "content": "Write a haiku about rain."}]


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        server.reply_text = "Rain on the window."
        yield server


def settings(fake: FakeLLMServer, tmp_path: Path, **more: object) -> ServeSettings:
    model = f"openai-compatible:{fake.model}@{fake.openai_base_url}"
    run = {"model": model, "samples": 1, "cache": False} | dict(more.pop("run", {}))  # type: ignore[call-overload]
    return ServeSettings(run=run, out=str(tmp_path), **more)  # type: ignore[arg-type]


def test_a_model_server_that_keeps_failing_is_a_503_with_retry_after(fake: FakeLLMServer, tmp_path: Path) -> None:
    fake.fail_status = 500
    with served(settings(fake, tmp_path)) as app:
        answer = httpx.post(
            f"{app.base_url}/chat/completions", json={"model": "redraft/none", "messages": ASK}, timeout=120
        )
        fake.fail_status = 429
        client = openai.OpenAI(base_url=app.base_url, api_key="unused", max_retries=0)
        with pytest.raises(openai.InternalServerError) as throttled:
            client.chat.completions.create(model="redraft/none", messages=ASK)
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
    assert answer.json()["error"]["type"] == "service_unavailable"
    assert "fake-model-1" in answer.json()["error"]["message"]
    assert throttled.value.status_code == 503


def test_a_model_server_that_hangs_is_a_504_at_the_request_timeout(fake: FakeLLMServer, tmp_path: Path) -> None:
    fake.freeze()
    try:
        with served(settings(fake, tmp_path, request_timeout_s=1.0)) as app:
            client = openai.OpenAI(base_url=app.base_url, api_key="unused", max_retries=0)
            with pytest.raises(openai.APIStatusError) as cut:
                client.chat.completions.create(model="redraft/none", messages=ASK)
    finally:
        fake.thaw()
    assert cut.value.status_code == 504 and cut.value.body["type"] == "timeout"  # type: ignore[index]


def settled(fake: FakeLLMServer) -> int:
    """The calls the model server has seen once a call sent as the loop was cancelled has had time to land."""
    time.sleep(0.2)
    return len(fake.requests)


def test_a_client_that_disconnects_cancels_its_loop_and_no_more_calls_are_made(
    fake: FakeLLMServer, tmp_path: Path
) -> None:
    fake.latency_s = 0.2
    run = {"max_rounds": 8, "patience": 8}
    with served(settings(fake, tmp_path, run=run)) as app:
        with pytest.raises(httpx.ReadTimeout):  # the client gives up after its first calls
            httpx.post(
                f"{app.base_url}/chat/completions",
                json={"model": "redraft/adversarial", "messages": ASK},
                timeout=0.5,
            )
        assert app.state.loop_cancelled.wait(30)
        made = settled(fake)
        time.sleep(1.0)  # five calls' latency: a loop still running would have made more by now
        assert len(fake.requests) == made
    assert 1 <= made <= 6  # eight rounds of a draft and a critique would be sixteen calls
    assert app.state.cancelled == 1 and app.state.metrics.requests == {499: 1}


def test_a_streaming_client_that_disconnects_cancels_its_loop(fake: FakeLLMServer, tmp_path: Path) -> None:
    fake.latency_s = 0.2
    body = {"model": "redraft/adversarial", "messages": ASK, "stream": True}
    with served(settings(fake, tmp_path, run={"max_rounds": 8, "patience": 8})) as app:
        with httpx.stream("POST", f"{app.base_url}/chat/completions", json=body, timeout=30) as stream:
            first = next(stream.iter_lines())
        assert app.state.loop_cancelled.wait(30)
        made = settled(fake)
        time.sleep(1.0)
        assert len(fake.requests) == made
    assert first.startswith(": redraft") and made <= 6


def test_stopping_the_server_drains_a_request_in_flight(fake: FakeLLMServer, tmp_path: Path) -> None:
    fake.latency_s = 0.5
    answers: list[httpx.Response] = []
    with served(settings(fake, tmp_path), timeout_graceful_shutdown=30) as app:
        asking = threading.Thread(
            target=lambda: answers.append(
                httpx.post(
                    f"{app.base_url}/chat/completions", json={"model": "redraft/none", "messages": ASK}, timeout=60
                )
            )
        )
        asking.start()
        while not fake.requests:  # the request's loop has made its call
            time.sleep(0.01)
        app.uvicorn.should_exit = True
        asking.join(60)
    assert answers and answers[0].status_code == 200
    assert answers[0].json()["choices"][0]["message"]["content"] == "Rain on the window."
    assert list(tmp_path.rglob("summary.json"))  # the replica finished its run directory on the way out
