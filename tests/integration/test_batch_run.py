"""``--batch`` on Ray: a whole run through OpenAI's batch API (a server on 127.0.0.1 speaking it), against the
same run online; and a driver killed while its batch is out, restarted with the same ``--out``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from redraft import RunConfig, RunHooks, run
from redraft.errors import Interrupted
from redraft.rundir import result_records
from tests.support.damage import tear_journal
from tests.support.fake_llm_servers import FakeLLMServer
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.ray

MODEL = "openai:gpt-4o-mini"


def reply(body: dict[str, Any]) -> str:
    """A critique when asked for one; else an answer that is right for some prompts and wrong for others."""
    if "response_format" in body:
        return '{"issues": []}'
    prompt = body["messages"][-1]["content"]
    return f"Answer: {len(prompt) % 7}"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        fake.model = "gpt-4o-mini"
        fake.reply_for = reply
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)  # goes with the spec to every worker
        yield fake


def settings(out: Path, **more: Any) -> RunConfig:
    return RunConfig.build(
        scenario="arithmetic", model=MODEL, limit=6, samples=2, max_rounds=2, seed=5, cache=False, out=str(out), **more
    )


def results(out: Path) -> dict[str, dict[str, Any]]:
    return {r["task_id"]: r for r in result_records(out)}


def test_a_batch_run_gets_the_online_runs_results_at_half_its_cost_with_the_same_calls(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path
) -> None:
    online = run(settings(tmp_path / "online"))
    online_requests = len(server.requests)
    batched = run(settings(tmp_path / "batch", batch=True))
    assert len(server.requests) == online_requests  # the batch run made no call online
    assert server.batch_lines_answered == online_requests == online.summary.usage.calls
    assert batched.summary.usage.calls == online.summary.usage.calls == batched.summary.usage.batch_calls
    assert online.summary.usage.cost_usd > 0
    assert batched.summary.usage.cost_usd == pytest.approx(online.summary.usage.cost_usd / 2)
    by_batch, by_online = results(tmp_path / "batch"), results(tmp_path / "online")
    assert sorted(by_batch) == sorted(by_online)
    for task_id, record in by_online.items():
        for field in ("answer", "score", "passed", "rounds", "stop_reason"):
            assert by_batch[task_id][field] == record[field], (task_id, field)
    # Rounds went out together: far fewer batches than calls, and the journal holds none open.
    assert 2 <= len(server.batches) < online_requests / 2
    journal = [json.loads(line) for line in (tmp_path / "batch" / "batches.jsonl").read_text().splitlines()]
    assert {r["submitted"] for r in journal if "submitted" in r} == {r["ended"] for r in journal if "ended" in r}


def repo_env() -> dict[str, str]:
    """This environment, with the repository on the path (the scripted models are the test suite's)."""
    return os.environ | {"PYTHONPATH": str(REPO_ROOT)}


def killed_with_a_batch_out(argv: list[str], out: Path) -> None:
    """``argv`` (a ``redraft run --batch`` writing ``out``) started, and killed once its journal says a batch is
    submitted: its driver gone while the provider still holds the batch."""
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=repo_env(), stderr=subprocess.PIPE, text=True)
    journal = out / "batches.jsonl"
    deadline = time.monotonic() + 120
    while not (journal.exists() and b"submitted" in journal.read_bytes()) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(2)  # the run's actors end with its driver (Ray ends a dead job's actors)


def command(address: str, out: Path) -> list[str]:
    flags = ["--model", MODEL, "--batch", "--no-cache", "--limit", "4", "--samples", "2", "--max-rounds", "1"]
    return [sys.executable, "-m", "redraft.cli", "run", "arithmetic", *flags, "--address", address, "--out", str(out)]


@pytest.mark.parametrize("journal_after", ["kept", "deleted", "torn"])
def test_a_driver_killed_while_its_batch_is_out_picks_it_up_again_and_pays_once(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path, journal_after: str
) -> None:
    """Whatever became of the journal: kept, deleted, or its last line torn (the collector died writing it)."""
    out = tmp_path / "run"
    server.batch_hold = True  # the provider takes its time
    killed_with_a_batch_out(command(ray_cluster.address, out), out)
    journal = out / "batches.jsonl"
    left = list(server.batches)
    assert left and not any(b.cancelled for b in left)  # a killed driver cancels nothing: they stay out
    assert all(b.metadata and b.metadata["redraft_run"] for b in left)  # each batch says whose run it is
    if journal_after == "deleted":
        journal.unlink()
    elif journal_after == "torn":
        tear_journal(out)

    server.batch_hold = False
    again = subprocess.run(
        command(ray_cluster.address, out), cwd=REPO_ROOT, env=repo_env(), capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr[-2000:]
    looked = "looking for this run's batches in the provider's list" in again.stderr
    assert looked == (journal_after != "kept"), again.stderr[-2000:]
    if journal_after == "torn":
        assert "batches.jsonl: kept 0, set aside 1 line: line 1 (byte 0) torn" in again.stderr
        assert (out / "batches.jsonl.damaged").exists()
    assert len(results(out)) == 4
    assert server.batches[: len(left)] == left
    lines = [custom_id for batch in server.batches for custom_id in batch.custom_ids]
    assert len(lines) == len(set(lines)) == 8  # 4 tasks x 2 drafts, each sent once: followed, not sent again
    assert server.batch_lines_answered == 8 and not server.requests
    summary = json.loads((out / "summary.json").read_text())
    assert summary["usage"]["batch_calls"] == summary["usage"]["calls"] == 8


def test_a_stopped_run_cancels_its_batches_still_open(ray_cluster: Any, server: FakeLLMServer, tmp_path: Path) -> None:
    server.batch_hold = True
    out = tmp_path / "run"
    stop = threading.Event()
    outcome: list[BaseException] = []

    def go() -> None:
        try:
            run(settings(out, batch=True), hooks=RunHooks(stop=stop))
        except Interrupted as exc:
            outcome.append(exc)

    driver = threading.Thread(target=go)
    driver.start()
    deadline = time.monotonic() + 120
    while not server.batches and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()  # what Ctrl-C and SIGTERM do
    driver.join(timeout=120)
    assert outcome and isinstance(outcome[0], Interrupted)
    assert server.batches and all(b.cancelled for b in server.batches)
    assert not server.requests  # nothing was made online on the way out
