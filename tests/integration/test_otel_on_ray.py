"""``redraft run --otel``: a run on Ray sends each task's spans as the driver writes it, to a real OTLP/HTTP
receiver on 127.0.0.1, over real HTTP model calls; the spans equal the run's results, and equal what the
export command sends for the same run afterwards but for their times."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from redraft import RunConfig, run
from redraft.telemetry import export_run
from tests.conftest import SESSION_API_KEY
from tests.support.fake_llm_servers import FakeLLMServer
from tests.support.otlp_receiver import OTLPReceiver, ReceivedSpan, descendants, spans_match_results

pytestmark = pytest.mark.ray


def reply(body: dict[str, Any]) -> str:
    """A critique when asked for one, else a draft the arithmetic check fails: two rounds, critiques in round 0."""
    return json.dumps({"issues": []}) if "response_format" in body else "Answer: 7"


def shape(receiver: OTLPReceiver) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Each task's spans under it, in order, by name and attributes: what does not depend on when it ran."""
    children = receiver.children()
    [root] = receiver.roots()
    tasks: list[ReceivedSpan] = children[root.span_id]
    return {
        task.attributes["redraft.task.id"]: [(s.name, s.attributes) for s in descendants(task, children)]
        for task in tasks
    }


def test_a_run_sends_each_tasks_spans_as_it_goes(ray_cluster: Any, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeLLMServer() as server, OTLPReceiver() as live:
        server.model = "gpt-4o-mini-2024-07-18"  # what OpenAI reports: priced as gpt-4o-mini
        server.reply_for = reply
        spec = f"openai-compatible:gpt-4o-mini@{server.openai_base_url}"
        config = RunConfig.build(limit=3, samples=2, max_rounds=2, drafter=spec, critic=spec, out=str(out))
        outcome = run(config.replace(otel=live.url))
        requests = len(server.requests)
    assert outcome.summary.tasks == 3 and outcome.summary.usage.cost_usd > 0
    tasks = spans_match_results(live, out)
    calls = [s for s in live.spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(calls) == requests == outcome.summary.usage.calls  # a span per call the server answered
    assert {(c.attributes["gen_ai.provider.name"], c.attributes["gen_ai.response.model"]) for c in calls} == {
        ("openai-compatible", "gpt-4o-mini-2024-07-18")
    }
    assert {c.attributes["redraft.role"] for c in calls} == {"drafter", "critic"}
    assert all(t.attributes["redraft.rounds"] == 2 for t in tasks.values())
    every_value = json.dumps([[s.attributes, s.resource] for s in live.spans])
    assert SESSION_API_KEY not in every_value  # the key went to the model server only
    with OTLPReceiver() as afterwards:
        export_run(out, afterwards.url)
    assert shape(afterwards) == shape(live)
