"""``redraft serve`` on a Ray of its own, as a user starts it: the first line on the terminal is where it listens
(Ray's and Ray Serve's messages go to the server's log), SIGTERM drains the request in flight, which is answered
and recorded, and the command ends with one summary line. The model is the suite's fake model server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx2 as httpx
import pytest

from redraft.rundir import RunReader
from tests.support.fake_llm_servers import FakeLLMServer
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.ray


def test_the_listening_line_comes_first_ray_s_messages_go_to_the_log_and_sigterm_drains_the_request_in_flight(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    with FakeLLMServer() as fake:
        fake.reply_text, fake.latency_s = "Rain on the window.", 2.0
        model = f"openai-compatible:{fake.model}@{fake.openai_base_url}"
        argv = [sys.executable, "-m", "redraft.cli", "serve", "--model", model, "--port", str(port), "--no-cache"]
        argv += ["--out", str(tmp_path), "--max-replicas", "1", "--samples", "1", "--drain-timeout", "120"]
        env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
        env.pop("RAY_ADDRESS", None)
        server = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert server.stdout is not None
        first = server.stdout.readline()  # waits until the server says where it listens
        body = {"model": "redraft/none", "messages": [{"role": "user", "content": "A haiku about rain?"}]}
        answers: list[httpx.Response] = []
        asking = threading.Thread(
            target=lambda: answers.append(
                httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=600)
            )
        )
        asking.start()
        while not fake.requests:  # the request's loop has made its call
            threading.Event().wait(0.05)
        server.send_signal(signal.SIGTERM)
        rest, said = server.communicate(timeout=600)
        asking.join()
    assert first == f"redraft serve: listening on http://127.0.0.1:{port}/v1\n"
    (answer,) = answers
    assert answer.status_code == 200, answer.text
    run = tmp_path / answer.json()["redraft"]["run"]
    assert answer.json()["id"] in {result.task_id for result in RunReader(run).finished()}
    assert said.strip().splitlines() == [
        "redraft: SIGTERM: stopping; requests in flight have 120 s (--drain-timeout) to finish and be recorded; "
        "a second signal stops at once"
    ]
    assert rest.strip().startswith("redraft serve: stopped; 1 request refined (1 model calls, 0.0000 USD)")
    assert server.returncode == 0
    log = (tmp_path / "serve.log").read_text()
    assert "ray.serve" in log and "Deleting app" in log
