"""redraft serve on real Ray Serve, on the session's Ray: the deployment's replica builds the app in its own
process, the proxy answers the openai SDK over HTTP, and the replica writes its run directory; stopping Serve
lets the replica finish it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from redraft.rundir import RunReader
from redraft.serving import ServeSettings
from tests.support.serving import CHECK, SCRIPTED

pytestmark = pytest.mark.ray


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def on_serve(ray_cluster: Any, tmp_path: Path) -> Iterator[str]:
    from ray import serve

    from redraft.serving._deployment import run_on_serve

    settings = ServeSettings(
        run={"model": SCRIPTED, "samples": 1, "max_rounds": 4},
        checks={"has42": CHECK},
        port=free_port(),
        out=str(tmp_path),
    )
    run_on_serve(settings, max_replicas=1)
    try:
        yield f"http://127.0.0.1:{settings.port}/v1"
    finally:
        serve.shutdown()


def test_the_sdk_calls_redraft_serve_on_ray_serve_and_the_replica_keeps_the_trace(
    on_serve: str, tmp_path: Path
) -> None:
    client = openai.OpenAI(base_url=on_serve, api_key="unused", max_retries=0, timeout=120)
    done = client.chat.completions.create(
        model="redraft/adversarial",
        messages=[{"role": "user", "content": "What is 6 times 7?"}],
        extra_body={"redraft": {"check": "has42"}},
    )
    streamed = client.chat.completions.create(
        model="redraft/none", messages=[{"role": "user", "content": "And again?"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    extra = done.model_extra["redraft"]  # type: ignore[index]
    assert done.choices[0].message.content == "Attempt 2: 42" and extra["passed"] and text == "Attempt 0: 41"
    ids = {r.task_id for r in RunReader(tmp_path / extra["run"]).finished()}
    assert extra["trace_id"] in ids and len(ids) == 2
