"""A judged run on a real Ray: the judge's actors grade each finished task over HTTP (the suite's fake server,
through the real client), its calls are the ``judge``'s usage, priced; and a resume pays no judged grade twice.
(A judge that fails, answers garbage or hangs: tests/unit/judging/test_judged_grades.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from redraft import Plugins, RunConfig, run
from redraft.backends.scripted import ScriptedSpec
from redraft.engine.prompts import fenced
from redraft.protocols.messages import Grade
from redraft.rundir.frames import KnownFrame
from redraft.rundir.reader import RunReader
from tests.support import judges
from tests.support.fake_llm_servers import FakeLLMServer

pytestmark = pytest.mark.ray

DRAFTER = ScriptedSpec(script=lambda request: "3 + 4 = 7\nAnswer: 7", spec="scripted:drafter")


def judged(body: dict[str, Any]) -> str:
    """The judge's reply: every criterion good for an answer that ends with its answer line."""
    candidate = fenced(body["messages"][-1]["content"])[2]
    level = "good" if "Answer:" in candidate else "bad"
    return json.dumps({"criteria": [{"criterion": c, "level": level, "reason": "ok"} for c in ("correct", "clear")]})


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        fake.model = "gpt-4o-mini"
        fake.reply_for = judged
        yield fake


def config(server: FakeLLMServer, tmp_path: Path, out: str, limit: int) -> RunConfig:
    rubric = tmp_path / "test.json"
    rubric.write_text(json.dumps(judges.RUBRIC))
    return RunConfig.build(
        scenario="arithmetic",
        samples=1,
        max_rounds=1,
        limit=limit,
        judge=f"openai-compatible:gpt-4o-mini@{server.openai_base_url}",
        rubric=str(rubric),
        out=str(tmp_path / out),
    )


def grades(out: Path) -> list[Grade]:
    return [
        f.message
        for _, frames in RunReader(out).tasks()
        for f in frames
        if isinstance(f, KnownFrame) and isinstance(f.message, Grade)
    ]


def test_a_judged_run_on_ray_grades_by_the_rubric_prices_the_judge_and_resumes_without_paying_twice(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path
) -> None:
    first = run(config(server, tmp_path, "run", limit=2), Plugins(backends={"drafter": DRAFTER, "critic": DRAFTER}))
    assert first.summary.graded == 2 and first.summary.graded_pass_rate == 1.0
    judge = first.summary.usage_by_role["judge"]
    assert judge.calls == 2 == len(server.requests) and judge.cost_usd > 0  # one answer a task, priced
    assert {g.judge for g in grades(tmp_path / "run")} == {"gpt-4o-mini"}
    resumed = run(config(server, tmp_path, "run", limit=3), Plugins(backends={"drafter": DRAFTER, "critic": DRAFTER}))
    assert (resumed.skipped, resumed.summary.graded) == (2, 3)
    assert len(server.requests) == 3  # only the new task's answer was judged: no recorded grade paid again
