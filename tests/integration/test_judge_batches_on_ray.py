"""A judged run with ``--batch`` on a real Ray: the judge's calls go through OpenAI's batch API (the suite's fake
server on 127.0.0.1, through the real SDK) at half the online judge's price, with the same grades; and a driver
killed while the judge's batch is out follows it when started again, paying no judgment twice."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from redraft import Plugins, RunConfig, run
from redraft.backends.scripted import ScriptedSpec
from redraft.rundir import result_records
from tests.integration.test_batch_run import killed_with_a_batch_out, repo_env
from tests.support import judges
from tests.support.fake_llm_servers import FakeLLMServer
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.ray

JUDGE = "openai:gpt-4o-mini"
DRAFTER = "scripted:tests.support.judges:answers_seven"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        fake.model = "gpt-4o-mini"
        fake.reply_for = judges.openai_body_judge
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)  # goes with the spec to every worker
        yield fake


@pytest.fixture
def rubric(tmp_path: Path) -> Path:
    path = tmp_path / "test.json"
    path.write_text(json.dumps(judges.RUBRIC))
    return path


def results(out: Path) -> dict[str, dict[str, Any]]:
    return {r["task_id"]: r for r in result_records(out)}


def test_a_batch_run_s_judge_grades_through_the_batch_api_at_half_the_online_judge_s_price(
    ray_cluster: Any, server: FakeLLMServer, rubric: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drafter = ScriptedSpec(script=judges.answers_seven, spec="scripted:drafter")

    def judged(out: str, **more: Any) -> Any:
        config = RunConfig.build(
            scenario="arithmetic", limit=4, samples=1, max_rounds=1, judge=JUDGE, rubric=str(rubric),
            cache=False, out=str(tmp_path / out), **more,
        )  # fmt: skip
        return run(config, Plugins(backends={"drafter": drafter, "critic": drafter}))

    online = judged("online")
    assert len(server.requests) == 4 and not server.batches  # one judgment a task, online
    # A grade stage that gave up at once would leave every grade "hung": one waiting for its batch has no watchdog.
    monkeypatch.setattr("redraft.actors._batches.GRADE_WATCHDOG_S", 0.0)
    batched = judged("batch", batch=True)
    assert len(server.requests) == 4  # the batch run's judge made no call online
    assert server.batch_lines_answered == 4 and 1 <= len(server.batches) < 4  # judgments gathered into batches
    judge, online_judge = batched.summary.usage_by_role["judge"], online.summary.usage_by_role["judge"]
    assert judge.calls == judge.batch_calls == online_judge.calls == 4 and online_judge.batch_calls == 0
    assert online_judge.cost_usd > 0 and judge.cost_usd == pytest.approx(online_judge.cost_usd / 2)
    assert batched.summary.graded == 4 and batched.summary.graded_pass_rate == online.summary.graded_pass_rate == 1.0
    by_batch, by_online = results(tmp_path / "batch"), results(tmp_path / "online")
    assert {t: r["grade"] for t, r in by_batch.items()} == {t: r["grade"] for t, r in by_online.items()}


def command(address: str, out: Path, rubric: Path) -> list[str]:
    flags = ["--model", DRAFTER, "--judge", JUDGE, "--rubric", str(rubric), "--batch", "--no-cache"]
    flags += ["--limit", "3", "--samples", "1", "--max-rounds", "1", "--address", address, "--out", str(out)]
    return [sys.executable, "-m", "redraft.cli", "run", "arithmetic", *flags]


def test_a_driver_killed_while_its_judge_s_batch_is_out_follows_it_and_pays_once(
    ray_cluster: Any, server: FakeLLMServer, rubric: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    server.batch_hold = True  # the provider takes its time over the judgments
    killed_with_a_batch_out(command(ray_cluster.address, out, rubric), out)
    left = list(server.batches)
    assert left and not any(b.cancelled for b in left)  # a killed driver cancels nothing: they stay out
    assert not (out / "results.jsonl").exists() or not (out / "results.jsonl").read_text().strip()  # none graded

    server.batch_hold = False
    again = subprocess.run(
        command(ray_cluster.address, out, rubric), cwd=REPO_ROOT, env=repo_env(), capture_output=True
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert b"following" in again.stderr and b"sent by an earlier invocation" in again.stderr
    assert server.batches[: len(left)] == left
    lines = [custom_id for batch in server.batches for custom_id in batch.custom_ids]
    assert len(lines) == len(set(lines)) == 3  # 3 tasks' judgments, each sent once: followed, not sent again
    assert server.batch_lines_answered == 3 and not server.requests
    graded = results(out)
    assert len(graded) == 3 and all(r["graded_pass"] for r in graded.values())
    summary = json.loads((out / "summary.json").read_text())
    judge = summary["usage_by_role"]["judge"]
    assert judge["batch_calls"] == judge["calls"] == 3
