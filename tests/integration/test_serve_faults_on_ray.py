"""redraft serve's faults on real Ray Serve (the session's Ray, two replicas, each request a task on the replica's
fleet of role actors, the suite's fake model server over HTTP). A replica, or the arbiter actors, killed with
requests in flight: every request ends with its answer or an OpenAI-shaped 503 carrying ``Retry-After``, none
hangs, and the openai SDK with its default retries gets every answer. A client that disconnects: its loop on the
fleet is cancelled."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import httpx2 as httpx
import openai
import pytest

from redraft.serving import PROXY_CALLBACK, PROXY_CALLBACK_VARIABLE, ServeSettings
from tests.integration.test_serve_on_ray import free_port
from tests.support.fake_llm_servers import FakeLLMServer

pytestmark = pytest.mark.ray

ASK = [{"role": "user", "content": "Write a haiku about rain."}]
IN_FLIGHT = 8
REPLICA = "SERVE_REPLICA::redraft#RedraftServer#"


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        server.reply_text = "Rain on the window."
        yield server


@pytest.fixture
def two_replicas(ray_cluster: Any, fake: FakeLLMServer, tmp_path: Path) -> Iterator[str]:
    from ray import serve

    from redraft.serving._deployment import run_on_serve

    model = f"openai-compatible:{fake.model}@{fake.openai_base_url}"
    run = {"model": model, "samples": 1, "cache": False, "max_rounds": 8, "patience": 8}
    settings = ServeSettings(run=run, port=free_port(), out=str(tmp_path))
    run_on_serve(settings, max_replicas=2, min_replicas=2)
    try:
        running(2)
        yield f"http://127.0.0.1:{settings.port}/v1"
    finally:
        fake.thaw()
        serve.shutdown()


def replicas() -> list[dict[str, str]]:
    import ray

    return [a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith(REPLICA)]


def running(count: int) -> None:
    """Returns once the application has ``count`` replicas running (the controller replaces a killed one)."""
    from ray import serve

    for _ in range(6000):
        states = serve.status().applications["redraft"].deployments["RedraftServer"].replica_states
        if states.get("RUNNING", 0) == count and len(replicas()) == count:
            return
        time.sleep(0.02)
    raise AssertionError(f"the application never had {count} replicas running")


def kill_the_busiest_replica() -> int:
    """Kills the replica holding the most requests (the proxy prefers one on its own node); their number."""
    import ray

    handles = [ray.get_actor(r["name"], namespace=r["namespace"]) for r in replicas()]
    holding = ray.get([h.get_num_ongoing_requests.remote() for h in handles])
    busiest = max(range(len(handles)), key=lambda n: holding[n])
    ray.kill(handles[busiest], no_restart=True)
    return int(holding[busiest])


def calls_in_flight(fake: FakeLLMServer, count: int) -> None:
    for _ in range(6000):
        if len(fake.requests) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"the model server saw {len(fake.requests)} calls, not {count}")


def ask(base_url: str, stream: bool) -> tuple[int, dict[str, str], str]:
    """One request with no retry: its status, headers and body (a stream's whole text)."""
    body = {"model": "redraft/none", "messages": ASK, "stream": stream}
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body, timeout=120) as answer:
        text = "".join(answer.iter_text())
    return answer.status_code, dict(answer.headers), text


def answered(answer: tuple[int, dict[str, str], str]) -> bool:
    status, _, text = answer
    return status == 200 and "Rain on the window." in text and "error" not in text


def lost_replica(answer: tuple[int, dict[str, str], str]) -> bool:
    """OpenAI's 503 with ``Retry-After`` (an answer not yet started), or a stream ended by an error event."""
    status, headers, text = answer
    if status == 503:
        return headers.get("retry-after") == "5" and json.loads(text)["error"]["type"] == "service_unavailable"
    events = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
    return status == 200 and bool(events) and json.loads(events[-1])["error"]["type"] == "service_unavailable"


def test_a_replica_killed_mid_request_answers_503_with_retry_after_and_the_sdk_gets_every_answer(
    two_replicas: str, fake: FakeLLMServer
) -> None:
    import os

    assert os.environ[PROXY_CALLBACK_VARIABLE] == PROXY_CALLBACK  # what the session's Ray nodes were given
    fake.freeze()  # every call held: the requests are in flight on both replicas
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        futures = [pool.submit(ask, two_replicas, n % 4 == 3) for n in range(IN_FLIGHT)]
        calls_in_flight(fake, IN_FLIGHT)
        killed = kill_the_busiest_replica()
        done, _ = wait(futures, timeout=120, return_when=FIRST_COMPLETED)
        first = [f.result() for f in done]  # only the lost replica's requests can end while the model holds
        fake.thaw()
        answers = [f.result(timeout=120) for f in futures]
    lost = [a for a in answers if not answered(a)]
    assert first and all(lost_replica(a) for a in first)
    assert all(lost_replica(a) for a in lost) and len(lost) == killed >= 1  # the killed replica's, no other

    running(2)
    fake.freeze()
    client = openai.OpenAI(base_url=two_replicas, api_key="unused", timeout=120)  # its default retries
    asked = len(fake.requests)
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        replies: list[Future[Any]] = [
            pool.submit(client.chat.completions.create, model="redraft/none", messages=ASK) for _ in range(IN_FLIGHT)
        ]
        calls_in_flight(fake, asked + IN_FLIGHT)
        assert kill_the_busiest_replica() >= 1
        fake.thaw()
        texts = [r.result(timeout=120).choices[0].message.content for r in replies]
    assert texts == ["Rain on the window."] * IN_FLIGHT
    assert len(fake.requests) > asked + IN_FLIGHT  # the lost requests were asked again, and answered


def test_on_ray_a_client_that_disconnects_cancels_its_loop_on_the_fleet(two_replicas: str, fake: FakeLLMServer) -> None:
    fake.latency_s = 0.5
    body = {"model": "redraft/adversarial", "messages": ASK, "stream": True}
    whole = httpx.post(f"{two_replicas}/chat/completions", json=body | {"stream": False}, timeout=120)
    full = len(fake.requests)  # the calls of a loop nobody cancels
    assert whole.status_code == 200 and full >= 3
    with httpx.stream("POST", f"{two_replicas}/chat/completions", json=body, timeout=120) as stream:
        lines = stream.iter_lines()  # kept: a line iterator let go closes the response
        assert next(lines).startswith(": redraft")
        calls_in_flight(fake, full + 1)  # the loop is under way on the fleet; leaving the block disconnects
    made = len(fake.requests)
    time.sleep(2.0)  # four calls' latency: a loop still running would have made more by now
    settled = len(fake.requests)
    time.sleep(2.0)
    assert len(fake.requests) == settled <= made + 1  # at most the call already sent as it was cancelled
    assert settled - full < full  # the cancelled loop made fewer calls than a whole one


def test_on_ray_an_arbiter_actor_killed_mid_request_is_a_503_with_retry_after_and_the_sdk_gets_its_answer(
    ray_cluster: Any, two_replicas: str, fake: FakeLLMServer
) -> None:
    import os
    import signal

    from tests.support.chaos import role_pids

    def kill_the_arbiters_once_called(asked: int) -> int:
        calls_in_flight(fake, asked + 1)  # the request's loop is on an arbiter actor, its call held
        arbiters = role_pids(ray_cluster, ("ArbiterActor",))
        assert arbiters
        for pid in arbiters:
            os.kill(pid, signal.SIGKILL)
        return len(arbiters)

    fake.freeze()
    with ThreadPoolExecutor(1) as pool:
        raw = pool.submit(ask, two_replicas, False)
        killed = kill_the_arbiters_once_called(0)
        status, headers, text = raw.result(timeout=120)  # answered while the model still holds the call
    assert status == 503, (status, text)
    error = json.loads(text)["error"]
    assert headers["retry-after"] == "5" and error["type"] == "service_unavailable"
    assert "arbiter actor" in error["message"]
    for _ in range(6000):  # the fleets' heartbeat replaces every arbiter, with no request to find them dead
        if len(role_pids(ray_cluster, ("ArbiterActor",))) == killed:
            break
        time.sleep(0.02)
    assert len(role_pids(ray_cluster, ("ArbiterActor",))) == killed
    client = openai.OpenAI(base_url=two_replicas, api_key="unused", timeout=120)  # its default retries
    with ThreadPoolExecutor(1) as pool:
        asked = len(fake.requests)
        reply = pool.submit(client.chat.completions.create, model="redraft/none", messages=ASK)
        kill_the_arbiters_once_called(asked)
        fake.thaw()
        assert reply.result(timeout=120).choices[0].message.content == "Rain on the window."
