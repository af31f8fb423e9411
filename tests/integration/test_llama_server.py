"""The openai-compatible backend against a third-party server: llama.cpp's own, serving the embedded model."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from redraft import RunConfig, run
from redraft.backends.local import embedded_model_path
from redraft.protocols.messages import Critique, Draft, iter_frames
from redraft.rundir import trace_bytes

pytestmark = [pytest.mark.model, pytest.mark.ray]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    # To a file, not a pipe: llama.cpp's model-load log alone can fill a pipe and block the server.
    log = (tmp_path_factory.mktemp("llama-server") / "server.log").open("wb")
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(embedded_model_path()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        "2",
    ]
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with code {server.returncode}; see {log.name}")
            try:
                urllib.request.urlopen(f"{base}/models", timeout=1).read()
                break
            except OSError:
                time.sleep(0.3)
        else:
            raise RuntimeError("llama_cpp.server did not answer within 60 s")
        yield base
    finally:
        os.killpg(server.pid, 9)
        server.wait(timeout=10)
        log.close()


def test_refines_arithmetic_through_llama_cpp_server(ray_cluster: Any, llama_server: str, tmp_path: Path) -> None:
    spec = f"openai-compatible:smollm2@{llama_server}"
    out = tmp_path / "run"
    outcome = run(
        RunConfig.build(limit=2, samples=2, max_rounds=2, drafter=spec, critic=spec, out=str(out), max_tokens=64)
    )
    assert outcome.summary.tasks == 2 and not outcome.summary.errors
    trace = list(iter_frames(trace_bytes(out)))
    drafts = [m for m in trace if isinstance(m, Draft)]
    assert drafts and all(d.text and d.usage.output_tokens > 0 for d in drafts)
    assert outcome.summary.usage.input_tokens > 0
    # json_schema was refused, json_object with the schema was taken: a server-side grammar binds every critique.
    critiques = [m for m in trace if isinstance(m, Critique)]
    assert critiques and all(c.error is None for c in critiques), [c.error for c in critiques]
