"""Against the real paid APIs: skipped unless a key is set. Small and cheap (a few short calls)."""

from __future__ import annotations

import os
from itertools import islice

import pytest

from redraft import RunConfig, refine
from redraft.scenarios import get_scenario

TASK = next(islice(get_scenario("arithmetic").tasks(seed=0), 1))
OPENAI_KEY = os.environ.get("REDRAFT_LIVE_OPENAI_API_KEY", "")
ANTHROPIC_KEY = os.environ.get("ANTHROPIC_API_KEY", "")


@pytest.mark.skipif(not OPENAI_KEY, reason="OPENAI_API_KEY is not set")
def test_openai_refines_a_task(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    result = refine(
        TASK, RunConfig.build(drafter="openai:gpt-4o-mini", critic="openai:gpt-4o-mini", cache=False)
    ).result
    assert result.passed and result.usage.cost_usd > 0 and result.unpriced_models == []


@pytest.mark.skipif(not ANTHROPIC_KEY, reason="ANTHROPIC_API_KEY is not set")
def test_anthropic_refines_a_task() -> None:
    config = RunConfig.build(drafter="anthropic:claude-haiku-4-5", critic="anthropic:claude-haiku-4-5", cache=False)
    result = refine(TASK, config).result
    assert result.passed and result.usage.cost_usd > 0 and result.unpriced_models == []
