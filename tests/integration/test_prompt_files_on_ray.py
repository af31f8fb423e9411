"""An arm's prompts file reaches its drafters on Ray, and only that arm's (the unit tests of prompts files are
in tests/unit/engine/test_prompt_files.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from redraft.rundir import result_records
from tests.unit.engine.test_prompt_files import OVERRIDE, arms_with


@pytest.mark.ray
def test_an_arm_s_prompts_reach_its_drafters_on_ray(ray_cluster: Any, tmp_path: Path) -> None:
    from redraft.cli._compare import make_plan
    from redraft.comparison._runner import run_comparison

    arms = arms_with(tmp_path, OVERRIDE)
    model = "scripted:tests.support.replies:prompt_follower"
    settings = {
        "drafter": model,
        "critic": model,
        "samples": 1,
        "max_rounds": 2,
        "limit": 3,
        "out": str(tmp_path / "c"),
    }
    plan = make_plan("arithmetic", settings, None, arms, 2, 1)
    run_comparison(plan)
    passed = {}
    for arm in ("plain", "nice"):
        records = result_records(tmp_path / "c" / "arms" / arm)
        passed[arm] = [r["graded_pass"] for r in records]
    assert passed == {"plain": [False] * 3, "nice": [True] * 3}
    manifests = {a: json.loads((tmp_path / "c" / "arms" / a / "manifest.json").read_text()) for a in ("plain", "nice")}
    assert manifests["nice"]["identity"]["prompts"]["draft_task"] == 7
    assert manifests["nice"]["fingerprint"] != manifests["plain"]["fingerprint"]
    assert manifests["nice"]["config"]["prompts"] == str(tmp_path / "mine.toml")
