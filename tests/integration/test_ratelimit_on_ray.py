"""The cluster-wide rate limiter across two nodes: callers on both share one strict sliding window, and an
adaptive one finds a server's concurrency limit from its 429s.

The window itself, on a fake clock, is tests/unit/backends/test_ratelimit.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from redraft import Plugins, RunHooks
from redraft.backends._ratelimit import LimitedSpec, RateLimits
from redraft.backends.registry import resolve
from redraft.rundir import trace_bytes
from tests.support.fake_llm_servers import FakeLLMServer


@pytest.mark.ray
def test_the_limit_holds_across_two_nodes(ray_cluster: Any, node_ids: list[str], tmp_path: Path) -> None:
    from redraft import RunConfig, run
    from redraft.protocols.messages import Draft, iter_frames

    limit, window = 3, 1.0
    with FakeLLMServer() as server:
        server.reply_text = "Answer: 7"
        spec = resolve(f"openai-compatible:fake@{server.openai_base_url}?adaptive=0")  # the window alone
        limited = LimitedSpec(spec, RateLimits(requests=limit, window_s=window), endpoint=f"test-{server.url}")
        out = tmp_path / "run"
        run(
            RunConfig.build(strategy="self_consistency", samples=2, limit=6, out=str(out), cache=False),
            Plugins(backends={"drafter": limited, "critic": limited}),
        )
        arrivals = sorted(r.arrived for r in server.requests)
    drafts = [m for m in iter_frames(trace_bytes(out)) if isinstance(m, Draft)]
    assert {d.node_id for d in drafts} == set(node_ids)  # callers on both nodes shared one limiter
    assert len(arrivals) == 12
    # In any window, less the hop from the limiter's grant to the server's arrival (its jitter reaches
    # a few hundred ms on a loaded 2-core machine), at most `limit` requests arrived. Two limiters
    # (one per node) would let 2 * limit through within milliseconds, and fail this.
    hop_jitter_s = 0.4
    for i, start in enumerate(arrivals):
        inside = [t for t in arrivals[i:] if t < start + window - hop_jitter_s]
        assert len(inside) <= limit, (start, inside)
    # And it did not just serialise everything: the 12 calls took about 12 / 3 windows, not much more.
    assert arrivals[-1] - arrivals[0] < (12 / limit) * window + 1.5


@pytest.mark.ray
def test_an_adaptive_limiter_finds_the_servers_limit_and_the_driver_shows_it(ray_cluster: Any, tmp_path: Path) -> None:
    from redraft import RunConfig, run
    from redraft.backends._ratelimit import START_WINDOW, EndpointState

    seen: list[EndpointState] = []
    with FakeLLMServer() as server:
        server.reply_text = "Answer: 7"
        server.latency_s = 0.05
        server.max_concurrent = 2  # a provider that takes two calls at a time and answers 429 to the rest
        model = f"openai-compatible:fake@{server.openai_base_url}"
        out = tmp_path / "run"
        config = RunConfig.build(
            scenario="arithmetic",
            strategy="self_consistency",
            samples=4,
            limit=12,
            out=str(out),
            cache=False,
            drafter=model,
            critic=model,
            max_tasks_in_flight=12,
        )
        outcome = run(config, hooks=RunHooks(on_endpoints=seen.extend))
        throttled, answered = server.throttled, len(server.requests) - server.throttled
    assert outcome.summary.tasks == 12 and not outcome.summary.errors  # every throttled attempt was retried
    assert answered == 12 * 4
    mine = [s for s in seen if s.endpoint == model]
    assert mine, "the driver never showed the endpoint"
    last = mine[-1]
    assert 1 <= last.throttled <= throttled  # every throttle the driver heard of, the server made
    assert last.window is not None and last.window < START_WINDOW  # it learned to back off to the server's limit
