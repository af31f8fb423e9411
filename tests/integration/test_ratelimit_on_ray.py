"""The cluster-wide rate limiter across two nodes: callers on both share one strict sliding window.

The window itself, on a fake clock, is tests/unit/backends/test_ratelimit.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from redraft.backends._ratelimit import LimitedSpec, RateLimits
from redraft.backends.registry import resolve
from tests.support.fake_llm_servers import FakeLLMServer


@pytest.mark.ray
def test_the_limit_holds_across_two_nodes(ray_cluster: Any, node_ids: list[str], tmp_path: Path) -> None:
    from redraft import RunConfig, run
    from redraft.protocols.messages import Draft, iter_frames

    limit, window = 3, 1.0
    with FakeLLMServer() as server:
        server.reply_text = "Answer: 7"
        spec = resolve(f"openai-compatible:fake@{server.openai_base_url}")
        limited = LimitedSpec(spec, RateLimits(requests=limit, window_s=window), endpoint=f"test-{server.url}")
        out = tmp_path / "run"
        run(
            RunConfig.build(strategy="self_consistency", samples=2, limit=6, out=str(out), cache=False),
            backends={"drafter": limited, "critic": limited},
        )
        arrivals = sorted(r.arrived for r in server.requests)
    drafts = [m for m in iter_frames((out / "trace.msgpack").read_bytes()) if isinstance(m, Draft)]
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
