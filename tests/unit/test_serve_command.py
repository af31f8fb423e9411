"""``redraft serve`` as a user runs it (``--in-process``, in a subprocess, over real HTTP): the line it listens on
comes first, Ctrl-C or SIGTERM drains the requests in flight for ``--drain-timeout`` and records them, a loop
still running then is cut, and the command ends with one line of what it served. The model is the suite's fake
OpenAI-compatible server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from redraft.rundir import RunReader
from tests.support.fake_llm_servers import FakeLLMServer
from tests.support.paths import REPO_ROOT

ASK = {"model": "redraft/none", "messages": [{"role": "user", "content": "Write a haiku about rain."}]}
STOPPED_WITHIN_S = 120.0
"""A generous bound on the command's exit once its drain is over: far less than the 300 s request timeout a
loop that was not cut would run for."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        server.reply_text = "Rain on the window."
        yield server


class Served:
    """``redraft serve --in-process`` in a subprocess: its lines as they come, and where it listens."""

    def __init__(self, fake: FakeLLMServer, out: Path, drain_s: float) -> None:
        self.port = free_port()
        model = f"openai-compatible:{fake.model}@{fake.openai_base_url}"
        argv = [sys.executable, "-m", "redraft.cli", "serve", "--in-process", "--model", model, "--samples", "1"]
        argv += ["--port", str(self.port), "--out", str(out), "--drain-timeout", str(drain_s), "--no-cache"]
        env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
        self.process = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.first = self.process.stdout.readline()  # waits for the server's first line
        self.url = f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def stop(self, signum: int) -> tuple[str, str]:
        self.process.send_signal(signum)
        out, err = self.process.communicate(timeout=STOPPED_WITHIN_S)
        return self.first + out, err


def asked_in_background(url: str, answers: list[httpx.Response | Exception]) -> threading.Thread:
    def ask() -> None:
        try:
            answers.append(httpx.post(url, json=ASK, timeout=600))
        except httpx.HTTPError as exc:
            answers.append(exc)

    asking = threading.Thread(target=ask)
    asking.start()
    return asking


def stream_lines(url: str) -> list[str]:
    with httpx.stream("POST", url, json=ASK | {"stream": True}, timeout=600) as stream:
        return [line for line in stream.iter_lines() if line]


def wait_for_call(fake: FakeLLMServer) -> None:
    while not fake.requests:
        threading.Event().wait(0.02)


def test_ctrl_c_drains_a_request_in_flight_records_it_and_ends_with_one_summary_line(
    fake: FakeLLMServer, tmp_path: Path
) -> None:
    fake.latency_s = 1.0
    served = Served(fake, tmp_path, drain_s=60)
    assert served.first.startswith(f"redraft serve: listening on http://127.0.0.1:{served.port}/v1")
    answers: list[httpx.Response | Exception] = []
    asking = asked_in_background(served.url, answers)
    wait_for_call(fake)  # the request's loop is under way
    printed, said = served.stop(signal.SIGINT)
    asking.join()
    (answer,) = answers
    assert isinstance(answer, httpx.Response) and answer.status_code == 200, answer
    trace_id, run = answer.json()["id"], answer.json()["redraft"]["run"]
    assert trace_id in {result.task_id for result in RunReader(tmp_path / run).finished()}
    assert "SIGINT: stopping; requests in flight have 60 s (--drain-timeout) to finish and be recorded" in said
    assert served.process.returncode == 0, said
    lines = printed.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("redraft serve: listening")
    assert lines[-1].startswith("redraft serve: stopped; 1 request refined (1 model calls, ")
    assert f"traces in {tmp_path / run}" in lines[-1] and f"log in {tmp_path / 'serve.log'}" in lines[-1]


def test_sigterm_cuts_a_loop_still_running_at_the_drain_timeout_with_a_503_and_stops(
    fake: FakeLLMServer, tmp_path: Path
) -> None:
    served = Served(fake, tmp_path, drain_s=1)
    fake.freeze()  # the model never answers: the loop would run to the request timeout (300 s)
    try:
        answers: list[httpx.Response | Exception] = []
        asking = asked_in_background(served.url, answers)
        streamed: list[str] = []
        streaming = threading.Thread(target=lambda: streamed.extend(stream_lines(served.url)))
        streaming.start()
        while len(fake.requests) < 2:  # both loops are under way
            threading.Event().wait(0.02)
        printed, said = served.stop(signal.SIGTERM)
        asking.join()
        streaming.join()
    finally:
        fake.thaw()
    (answer,) = answers
    assert streamed[-1] == "data: [DONE]" and '"type":"service_unavailable"' in streamed[-2]
    assert isinstance(answer, httpx.Response), answer
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
    assert answer.json()["error"]["type"] == "service_unavailable" and "not recorded" in answer.text
    assert "SIGTERM: stopping; requests in flight have 1 s (--drain-timeout)" in said
    assert printed.strip().splitlines()[-1].startswith("redraft serve: stopped; 0 requests refined (0 model calls")
