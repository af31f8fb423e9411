"""An arbiter's death costs a task only its round in flight; a run stops for the cluster only after its stall window.

The model is a real HTTP server on 127.0.0.1 that counts every request: what a run paid. The arbiter is
SIGKILLed mid-task, on the session's shared Ray.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from redraft import RunConfig, run
from redraft.actors._attempts import AttemptPolicy
from redraft.errors import ClusterError
from tests.support.chaos import lines, records, run_settings
from tests.support.fake_llm_servers import FakeLLMServer
from tests.support.replies import CRITIQUE, worked

pytestmark = pytest.mark.ray

ROUNDS = 3
SAMPLES = 2


def round_of(body: dict[str, Any]) -> int | None:
    """The round a draft request is for (one memory line per earlier attempt); None for a critique."""
    if "response_format" in body or "messages" not in body:
        return None
    return int(body["messages"][-1]["content"].count("- attempt "))


class HeldServer(FakeLLMServer):
    """Answers every draft wrong (so the task plays all its rounds); holds the drafts of round 1 until `go_on`."""

    def __init__(self) -> None:
        super().__init__()
        self.in_round_one = threading.Event()
        self.go_on = threading.Event()
        self.reply_for = self.reply

    def reply(self, body: dict[str, Any]) -> str:
        if "response_format" in body:
            return json.dumps(CRITIQUE)
        round_ = round_of(body) or 0
        if round_ == 1:
            self.in_round_one.set()
            self.go_on.wait(600)
        prompt = body["messages"][-1]["content"].split("\n\n")[0]
        return f"Step by step.\n{worked(prompt, 1 + round_)}"  # wrong, and differently each round

    def drafts(self, round_: int, prompt: str) -> int:
        """The draft requests of ``round_`` for the task of ``prompt``."""
        return sum(round_of(r.body) == round_ and prompt in r.body["messages"][-1]["content"] for r in self.requests)


@pytest.fixture
def server() -> Iterator[HeldServer]:
    with HeldServer() as fake:
        fake.latency_s = 0.05
        yield fake


def test_an_arbiter_killed_mid_task_costs_only_its_own_tasks_round_in_flight(
    ray_cluster: Any, server: HeldServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four tasks, one per arbiter (two on each node); the arbiter of one is SIGKILLed during its round 1."""
    import ray

    from redraft.actors import _dispatcher, _leases
    from redraft.actors._fleet import Fleet

    fleets: list[Fleet] = []
    out_now: list[dict[Any, Any]] = []
    checkpointed = threading.Event()

    class Watched(Fleet):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            fleets.append(self)
            super().__init__(*args, **kwargs)

    land = _dispatcher.Dispatcher._land

    def landed(self: _dispatcher.Dispatcher, key: Any) -> None:
        land(self, key)
        out_now[:] = [self.in_flight]
        if any(pending.pairs for pending in self.in_flight.values()):  # a finished round reached the driver
            checkpointed.set()

    monkeypatch.setattr(_leases, "Fleet", Watched)
    monkeypatch.setattr(_dispatcher.Dispatcher, "_land", landed)
    out, tasks = tmp_path / "arbiter-killed", 4
    settings = run_settings(server, out, tasks, tasks, samples=SAMPLES, max_rounds=ROUNDS)
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.setdefault("outcome", run(RunConfig.build(**settings))))
    thread.start()
    try:
        assert server.in_round_one.wait(300) and checkpointed.wait(300)  # a round done and kept; round 1 out
        victim = next(pending for pending in list(out_now[0].values()) if pending.pairs)
        pid = ray.get(victim.arbiter.__ray_call__.remote(lambda _self: os.getpid()))
        os.kill(pid, signal.SIGKILL)
    finally:
        server.go_on.set()
        thread.join(timeout=600)
    assert not thread.is_alive() and "outcome" in box
    (fleet,) = fleets
    assert len(fleet.arbiters) == Fleet.arbiters_per_node * len(ray_cluster.list_all_nodes())
    recs = records(out)
    assert {task_id: r["attempts"] for task_id, r in recs.items()} == {
        task_id: 2 if task_id == victim.task.task_id else 1 for task_id in recs
    }  # the tasks on the other arbiters went on
    record = recs[victim.task.task_id]
    assert record["retried_for"] == ["ActorDiedError"] and record["rounds"] == ROUNDS
    prompt = victim.task.prompt
    assert server.drafts(0, prompt) == SAMPLES  # the round finished before the kill was not paid again
    assert server.drafts(1, prompt) == 2 * SAMPLES  # the round in flight was: once before the kill, once after
    assert server.drafts(2, prompt) == SAMPLES
    assert sum(r["usage"]["calls"] for r in recs.values()) == len(server.requests) - SAMPLES  # one paid twice


def test_a_run_whose_every_attempt_hangs_stops_after_its_stall_window_naming_what_failed(
    ray_cluster: Any, tmp_path: Path
) -> None:
    """Before, the run stopped once a task's 4 attempts failed with no task finished meanwhile; a kill storm
    does that to a healthy run. Now every task is redone until nothing has succeeded for the stall window."""
    tasks, window = 2, 40.0
    with FakeLLMServer() as frozen:
        frozen.freeze()  # every request held: each attempt passes its watchdog
        settings = run_settings(frozen, tmp_path / "stalled", tasks, tasks, task_watchdog=1.0, stall_window=window)
        try:
            with pytest.raises(ClusterError) as raised:
                run(RunConfig.build(**settings))
        finally:
            frozen.thaw()
    message = str(raised.value)
    assert message.startswith("nothing succeeded for ") and "\n" not in message
    assert f"stall window {window:.0f} s" in message and "rerun with the same --out" in message
    failed = int(message.split("CallTimeoutError x")[1].split(";")[0])
    assert failed > tasks * AttemptPolicy().max_attempts  # each task went past its attempts, and the run went on
    assert lines(tmp_path / "stalled" / "results.jsonl") == 0  # nothing recorded for the stall
