"""A damaged run directory resumed on Ray: the tasks it kept are never paid for again, and only what the damage
cost is redone. The model is a real HTTP server that counts every request (`arithmetic_server`), with no
response cache, so a task paid twice shows; each kind of damage, byte by byte: tests/unit/rundir/."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from redraft import RunConfig, run
from redraft.rundir import RunReader
from tests.support.chaos import arithmetic_server, records, run_settings
from tests.support.damage import DAMAGES, damage
from tests.support.fake_llm_servers import FakeLLMServer

pytestmark = pytest.mark.ray

TASKS = 20


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with arithmetic_server(latency_s=0.0) as fake:
        yield fake


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_run_directory_resumes_paying_only_for_what_the_damage_cost(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = RunConfig.build(**run_settings(server, tmp_path / "run", TASKS, 4))
    run(settings)
    before = records(tmp_path / "run")
    lost = damage(tmp_path / "run", how)  # the tasks whose results the damage took

    sent = len(server.requests)
    with caplog.at_level(logging.WARNING, logger="redraft.actors.driver"):
        outcome = run(settings)
    paid = len(server.requests) - sent
    said = [r.getMessage() for r in caplog.records if r.name == "redraft.actors.driver"]
    assert said and all("\n" not in line for line in said)  # each file that lost something, in one line

    after = records(tmp_path / "run")  # every task once
    assert sorted(after) == sorted(before) and outcome.skipped == TASKS - len(lost)
    redone_calls = sum(after[task]["usage"]["calls"] for task in lost)
    assert paid == redone_calls  # not one request for a task the directory kept
    for task, record in before.items():  # the kept ones as they were: not run again
        if task not in lost:
            assert [after[task][k] for k in ("text", "usage", "wall_s")] == [
                record[k] for k in ("text", "usage", "wall_s")
            ]
    traced = {entry.task_id for entry, frames in RunReader(tmp_path / "run").tasks() if frames}
    expected = set(before) if how == "a corrupt middle line" else set()
    assert traced == expected
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["tasks"] == TASKS
