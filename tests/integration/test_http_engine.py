"""The whole engine on Ray over real HTTP: openai-compatible backends against a server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from redraft import RunConfig, run
from redraft.protocols.messages import Critique, Draft, iter_frames
from redraft.rundir import result_records, trace_bytes
from tests.conftest import SESSION_API_KEY
from tests.support.fake_llm_servers import FakeLLMServer

pytestmark = pytest.mark.ray


def test_refines_over_http_with_usage_equal_to_what_the_server_reported(ray_cluster: Any, tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        server.reply_text = '{"issues": []}'  # valid as a critique; as a draft, no answer: checks fail
        spec = f"openai-compatible:fake-model@{server.openai_base_url}"
        out = tmp_path / "run"
        outcome = run(RunConfig.build(limit=3, samples=2, max_rounds=2, drafter=spec, critic=spec, out=str(out)))
        requests = list(server.requests)
    summary = outcome.summary
    assert summary.tasks == 3
    # Every request the server answered is counted once, with the tokens it reported.
    assert summary.usage.calls == len(requests)
    assert summary.usage.input_tokens == server.input_tokens * len(requests)
    assert summary.usage.output_tokens == server.output_tokens * len(requests)
    assert summary.usage.cached_tokens == server.cached_tokens * len(requests)
    trace = list(iter_frames(trace_bytes(out)))
    drafts = [m for m in trace if isinstance(m, Draft)]
    critiques = [m for m in trace if isinstance(m, Critique)]
    assert len(drafts) + len(critiques) == len(requests)
    assert {d.model for d in drafts} == {"fake-model-1"}
    assert all(c.error is None for c in critiques)  # the JSON reply validated as a critique
    # The critic asked for structured output.
    assert any("response_format" in r.body for r in requests)
    # The key went to the server, and nowhere into the run directory.
    assert all(r.headers.get("authorization") == f"Bearer {SESSION_API_KEY}" for r in requests)
    for path in out.iterdir():
        assert SESSION_API_KEY.encode() not in path.read_bytes(), path.name
    # Nor into any log of the Ray session (drivers, workers, raylets, GCS).
    import ray

    logs = Path(ray._private.worker._global_node.get_logs_dir_path())
    log_files = [p for p in logs.rglob("*") if p.is_file()]
    assert log_files
    for path in log_files:
        assert SESSION_API_KEY.encode() not in path.read_bytes(), path.name


def test_a_resumed_run_sends_no_second_request_for_answered_calls(ray_cluster: Any, tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"fake-model": {"input": 1.0, "output": 2.0}}))
    with FakeLLMServer() as server:
        server.reply_text = "Answer: 7"
        spec = f"openai-compatible:fake-model@{server.openai_base_url}"
        config = RunConfig.build(
            limit=4, samples=2, max_rounds=2, drafter=spec, critic=spec, prices=str(prices), out=str(tmp_path / "run")
        )
        first = run(config)
        answered = len(server.requests)
        # Lose the last two results, as a run killed before writing them would.
        results = tmp_path / "run" / "results.jsonl"
        lines = results.read_text().splitlines(keepends=True)
        results.write_text("".join(lines[:2]))
        resumed = run(config)
        assert len(server.requests) == answered  # every redone call came from the cache
    assert resumed.skipped == 2 and resumed.summary.tasks == 4
    again = result_records(tmp_path / "run")
    assert sum(r["usage"]["cache_hits"] for r in again) == sum(r["usage"]["calls"] for r in again[2:])
    assert resumed.summary.usage.input_tokens == first.summary.usage.input_tokens
    # The resumed run paid for those calls itself, before it was cut: spent, as if it had never stopped.
    cost = first.summary.usage.cost_usd
    assert cost > 0 and resumed.summary.usage.saved_calls == 0
    assert resumed.summary.usage.spent_usd == pytest.approx(cost, rel=1e-9)
    # Another run directory asking the same calls pays nothing: every call is saved by the cache (the server is
    # gone, so a call that reached for it would fail the run).
    usage = run(config.replace(out=str(tmp_path / "another"))).summary.usage
    assert usage.saved_calls == usage.cache_hits == usage.calls == first.summary.usage.calls
    assert usage.spent_usd == 0.0 and usage.saved_usd == pytest.approx(cost, rel=1e-9)
