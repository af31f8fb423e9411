"""redraft serve's metrics, read back from Ray's own metrics export (each node's Prometheus endpoint, what a
Prometheus server scrapes): requests answered move the counts the serving guide names (requests by status,
latency, calls per request, cost). On real Ray Serve, the suite's fake model server over HTTP, priced."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from redraft.serving import ServeSettings
from tests.integration.test_serve_on_ray import free_port
from tests.support.fake_llm_servers import FakeLLMServer

pytestmark = pytest.mark.ray

ASK = [{"role": "user", "content": "Write a haiku about rain."}]
PRICE = {"input": 1000.0, "output": 2000.0}
"""USD per million tokens: a call of 11 input and 7 output tokens costs 0.025."""

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def priced_server(ray_cluster: Any, tmp_path: Path) -> Iterator[str]:
    from ray import serve

    from redraft.serving._deployment import run_on_serve

    with FakeLLMServer() as fake:
        prices = tmp_path / "prices.json"
        prices.write_text(json.dumps({fake.model: PRICE}))
        model = f"openai-compatible:{fake.model}@{fake.openai_base_url}"
        run = {"model": model, "samples": 1, "cache": False, "prices": str(prices)}
        settings = ServeSettings(run=run, port=free_port(), out=str(tmp_path / "runs"))
        run_on_serve(settings, max_replicas=1)
        try:
            yield f"http://127.0.0.1:{settings.port}/v1"
        finally:
            serve.shutdown()


def exported() -> Series:
    """Every redraft_serve sample of every node's metrics export, by name and labels."""
    import ray
    from prometheus_client.parser import text_string_to_metric_families

    series: Series = {}
    for node in ray.nodes():
        if not node["Alive"]:
            continue
        url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.startswith("ray_redraft_serve_"):
                    series[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return series


def new_totals(before: Series) -> dict[str, float]:
    """The samples that were not exported before, summed by name (this replica's: it had recorded nothing)."""
    totals: dict[str, float] = {}
    for (name, labels), value in exported().items():
        if (name, labels) not in before:
            key = name + "".join(f"[{v}]" for k, v in labels if k in ("status", "le"))
            totals[key] = totals.get(key, 0.0) + value
    return totals


def test_requests_move_the_served_metrics_in_ray_s_export(priced_server: str) -> None:
    before = exported()
    client = openai.OpenAI(base_url=priced_server, api_key="unused", max_retries=0, timeout=120)
    for _ in range(2):
        client.chat.completions.create(model="redraft/best_of_n", messages=ASK, extra_body={"redraft": {"samples": 3}})
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=ASK)
    totals: dict[str, float] = {}
    for _ in range(600):  # Ray's agent exports what the workers report every few seconds
        totals = new_totals(before)
        if totals.get("ray_redraft_serve_requests_total[200]") == 2 and "ray_redraft_serve_cost_usd_total" in totals:
            break
        time.sleep(0.1)
    assert totals["ray_redraft_serve_requests_total[200]"] == 2 and totals["ray_redraft_serve_requests_total[404]"] == 1
    assert totals["ray_redraft_serve_latency_s_count"] == 3 and totals["ray_redraft_serve_latency_s_sum"] > 0
    calls = "ray_redraft_serve_calls_per_request_bucket"
    assert totals[f"{calls}[2.0]"] == 0 and totals[f"{calls}[3.0]"] == 2  # three samples drafted for each answer
    assert totals["ray_redraft_serve_calls_per_request_count"] == 2  # (Ray sums a histogram by its buckets)
    assert totals["ray_redraft_serve_cost_usd_total"] == pytest.approx(6 * 0.025)
