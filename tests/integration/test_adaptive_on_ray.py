"""`adaptive` on Ray: the batch's ledger is one actor every arbiter shares, it lends each call of the bank once,
and a resumed run rebuilds it from the run directory before any task starts.

The rules themselves, in-process: tests/unit/strategies/test_adaptive.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

from redraft import Plugins
from redraft.backends.base import ChatRequest
from redraft.backends.scripted import ScriptedSpec
from redraft.protocols.messages import DraftRequest, iter_frames
from redraft.rundir import result_records, trace_bytes
from redraft.scenarios import get_scenario
from tests.support.replies import CRITIQUE, is_critique, task_of, worked

TASKS = list(islice(get_scenario("arithmetic").tasks(seed=0), 6))
BUDGET = 3


@dataclass(frozen=True)
class EasyOrNever:
    """The ``easy`` problems are solved at once; every other draft is wrong, each differently (by its seed: two
    drafts alike would stop their task as ``stable``, before its budget)."""

    easy: frozenset[str]

    def __call__(self, request: ChatRequest) -> str:
        if is_critique(request):
            return json.dumps(CRITIQUE)
        problem = task_of(request)
        return worked(problem, 0 if problem in self.easy else 1 + (request.seed or 0) % 10**9)


def records(out: Path) -> dict[str, dict[str, Any]]:
    return {r["task_id"]: r for r in result_records(out)}


@pytest.mark.ray
def test_the_bank_is_shared_lent_once_and_rebuilt_on_resume(ray_cluster: Any, tmp_path: Path) -> None:
    import ray

    from redraft import RunConfig, run
    from redraft.actors._ledger import batch_name
    from redraft.strategies import ledger_name

    spec = ScriptedSpec(script=EasyOrNever(frozenset(t.prompt for t in TASKS[:3])))
    out = tmp_path / "run"
    settings = dict(strategy="adaptive", samples=1, calls_per_task=BUDGET, max_rounds=30, patience=30, out=str(out))
    first = run(RunConfig.build(**settings, limit=3), Plugins(backends={"drafter": spec, "critic": spec}))
    assert (first.summary.tasks, first.summary.passed) == (3, 3)
    assert [r["usage"]["calls"] for r in records(out).values()] == [1, 1, 1]  # each left 2 calls in the bank
    with pytest.raises(ValueError):
        ray.get_actor(ledger_name(batch_name(out)))  # the ledger went with its run

    run(RunConfig.build(**settings, limit=6), Plugins(backends={"drafter": spec, "critic": spec}))
    hard = [r for task_id, r in records(out).items() if task_id in {t.task_id for t in TASKS[3:]}]
    assert len(hard) == 3 and all(r["stop_reason"] == "budget" and not r["passed"] for r in hard), [
        (r["stop_reason"], r["usage"]["calls"], r.get("stop_detail")) for r in hard
    ]
    # Their own 3 calls each, and the 6 the first invocation's tasks left: only a ledger rebuilt from the run
    # directory knows of those, and only one shared by every arbiter lends each of them exactly once.
    assert sum(r["usage"]["calls"] for r in hard) == 3 * BUDGET + 6
    assert sum(r["usage"]["calls"] for r in records(out).values()) == BUDGET * len(TASKS)
    trace = list(iter_frames(trace_bytes(out)))
    chosen = [m for m in trace if isinstance(m, DraftRequest)]
    assert chosen and all(m.intent is not None for m in chosen)


@pytest.mark.ray
def test_a_ledger_killed_mid_run_is_restarted_and_loses_no_task(ray_cluster: Any, tmp_path: Path) -> None:
    import threading
    import time

    import ray

    from redraft import RunConfig, run
    from redraft.actors._ledger import batch_name
    from redraft.strategies import ledger_name

    out = tmp_path / "chaos"
    spec = ScriptedSpec(script=EasyOrNever(frozenset(t.prompt for t in TASKS[::2])), delay_s=0.3)
    answered_after_kill: list[float] = []

    def kill_it_once_a_task_is_done() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            (out / "results.jsonl").exists() and (out / "results.jsonl").read_text().strip()
        ):
            time.sleep(0.05)
        ledger = ray.get_actor(ledger_name(batch_name(out)))
        ray.kill(ledger, no_restart=False)
        answered_after_kill.append(ray.get(ledger.balance.remote(), timeout=30))  # restarted: it answers

    killer = threading.Thread(target=kill_it_once_a_task_is_done)
    killer.start()
    config = RunConfig.build(
        strategy="adaptive", samples=1, calls_per_task=BUDGET, max_rounds=30, patience=30, limit=6, out=str(out)
    )
    outcome = run(config, Plugins(backends={"drafter": spec, "critic": spec}))
    killer.join()
    assert len(answered_after_kill) == 1
    done = records(out)
    assert len(done) == 6 == outcome.summary.tasks and all(r["error"] is None for r in done.values())
    assert sum(r["passed"] for r in done.values()) == 3
    assert sum(r["usage"]["calls"] for r in done.values()) <= BUDGET * 6  # no call of the bank lent twice


@pytest.mark.ray
def test_escalations_are_paid_from_the_one_bank_every_arbiter_shares(ray_cluster: Any, tmp_path: Path) -> None:
    """Half the tasks only the stronger model solves: they buy its calls with what the easy half left in the bank,
    on a cluster as in one process, and the batch's money holds but for part of the last call."""
    from redraft import RunConfig, run
    from redraft.backends.pricing import Price, load_prices

    easy = frozenset(t.prompt for t in TASKS[:3])
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"cheap": {"input": 1.0, "output": 1.0}, "strong": {"input": 5.0, "output": 5.0}}))
    cheap = ScriptedSpec(script=EasyOrNever(easy), model="cheap")
    strong = ScriptedSpec(script=EasyOrNever(frozenset(t.prompt for t in TASKS)), model="strong")
    usd = 0.003
    out = tmp_path / "escalated"
    config = RunConfig.build(
        strategy="adaptive", samples=1, usd_per_task=usd, escalate="strong", prices=str(prices),
        max_rounds=30, patience=30, limit=6, out=str(out),
    )  # fmt: skip
    outcome = run(config, Plugins(backends={"drafter": cheap, "critic": cheap, "escalate": strong}))
    done = records(out)
    assert outcome.summary.tasks == 6 and all(r["error"] is None for r in done.values())
    hard = {t.task_id for t in TASKS[3:]}
    assert all(r["passed"] for task_id, r in done.items() if task_id not in hard)
    trace = list(iter_frames(trace_bytes(out)))
    escalated = {
        m.task.task_id for m in trace if isinstance(m, DraftRequest) and m.intent and m.intent.action == "escalate"
    }
    assert escalated and escalated <= hard  # the easy half never did
    assert {task_id for task_id, r in done.items() if task_id in hard and r["passed"]} <= escalated  # it bought them
    table = load_prices(str(prices))
    assert table.price_of("strong") == Price(input=5.0, output=5.0)
    dearest = max(table.priced(m.model, m.usage).cost_usd for m in trace if hasattr(m, "model") and hasattr(m, "usage"))
    assert sum(r["usage"]["cost_usd"] for r in done.values()) <= usd * 6 + dearest
