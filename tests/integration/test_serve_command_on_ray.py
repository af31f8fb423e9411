"""``redraft serve`` on a Ray of its own, as a user starts it: the first line on the terminal is where it listens
(Ray's and Ray Serve's messages go to the server's log), SIGTERM stops it with one summary line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.support.paths import REPO_ROOT
from tests.support.serving import SCRIPTED

pytestmark = pytest.mark.ray


def test_the_terminal_shows_the_listening_line_first_and_ray_s_messages_are_in_the_server_s_log(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    argv = [sys.executable, "-m", "redraft.cli", "serve", "--model", SCRIPTED, "--port", str(port)]
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    env.pop("RAY_ADDRESS", None)
    server = subprocess.Popen(
        [*argv, "--out", str(tmp_path), "--max-replicas", "1"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    first = server.stdout.readline()  # waits until the server says where it listens
    body = {"model": "redraft/none", "messages": [{"role": "user", "content": "What is 6 times 7?"}]}
    answer = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=300)
    server.send_signal(signal.SIGTERM)
    rest, said = server.communicate(timeout=300)
    assert first == f"redraft serve: listening on http://127.0.0.1:{port}/v1\n"
    assert answer.status_code == 200, answer.text
    assert said.strip().splitlines() == [
        "redraft: SIGTERM: stopping; requests in flight have 5 s (--drain-timeout) to finish and be recorded; "
        "a second signal stops at once"
    ]
    assert rest.strip().startswith("redraft serve: stopped; 1 request refined (1 model calls, 0.0000 USD)")
    assert server.returncode == 0
    log = (tmp_path / "serve.log").read_text()
    assert "ray.serve" in log and "Deleting app" in log
