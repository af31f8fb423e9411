"""redraft serve on real Ray Serve, on the session's Ray: the deployment's replica builds the app in its own
process, the proxy answers the openai SDK over HTTP, and the replica writes its run directory; stopping Serve
lets the replica finish it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import openai
import pytest

from redraft.rundir import RunReader
from redraft.serving import ServeSettings
from tests.support.serving import CHECK, SCRIPTED, WHEREABOUTS, served

pytestmark = pytest.mark.ray
ASK = [{"role": "user", "content": "What is 6 times 7?"}]


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
        aliases={"where": f"redraft/none/{WHEREABOUTS}"},
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


ASKED = [("redraft/adversarial", {"check": "has42"}), ("redraft/best_of_n", {"samples": 3}), ("redraft/none", {})]


def answers(base_url: str) -> list[tuple[Any, ...]]:
    """What the server answers `ASKED`: each answer, its rounds, stop reason, calls, per-role usage and tokens."""
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=120)
    seen = []
    for model, extra in ASKED:
        done = client.chat.completions.create(model=model, messages=ASK, extra_body={"redraft": extra})
        got = done.model_extra["redraft"]  # type: ignore[index]
        assert done.usage is not None
        text, tokens = done.choices[0].message.content, done.usage.total_tokens
        seen.append((text, got["rounds"], got["stop_reason"], got["calls"], got["usage_by_role"], tokens))
    return seen


def test_on_ray_a_request_runs_on_the_cluster_s_role_actors_with_the_answers_it_gets_in_one_process(
    on_serve: str, tmp_path: Path
) -> None:
    client = openai.OpenAI(base_url=on_serve, api_key="unused", max_retries=0, timeout=120)
    where = client.chat.completions.create(model="where", messages=ASK).choices[0].message.content
    assert where == "an unnamed actor"  # a role actor of the fleet, not the replica (SERVE_REPLICA::...)
    on_ray = answers(on_serve)
    here = ServeSettings(run={"model": SCRIPTED, "samples": 1, "max_rounds": 4}, checks={"has42": CHECK})
    with served(msgspec.structs.replace(here, out=str(tmp_path / "here"))) as app:
        assert answers(app.base_url) == on_ray
    assert on_ray[0][:3] == ("Attempt 2: 42", 3, "threshold") and on_ray[1][3] == 3  # best of 3 samples
