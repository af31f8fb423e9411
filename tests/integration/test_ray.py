"""The roles as real Ray actors on a simulated two-node cluster."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

from redraft import Plugins, RunConfig, RunHooks, run
from redraft.actors._factory import member, run_roles
from redraft.actors._ray import alive_nodes
from redraft.backends.scripted import ScriptedSpec
from redraft.engine.resolution import Cast, RoleSetup
from redraft.protocols import ProtocolError
from redraft.protocols.messages import Draft, DraftRequest, Grade, Result, Verification, decode, encode, iter_frames
from redraft.rundir import result_records, trace_bytes
from redraft.scenarios import get_scenario
from redraft.strategies import get_strategy
from tests.support.replies import Clocked, HumanEvalOracle, LateLearner, Unstartable

pytestmark = pytest.mark.ray

TASKS = list(islice(get_scenario("arithmetic").tasks(seed=0), 6))


def test_roles_exchange_validated_bytes_across_actor_boundaries(ray_cluster: Any) -> None:
    import ray

    spec = ScriptedSpec(script=LateLearner())
    setup = RoleSetup(scenario="arithmetic", drafter=spec, critic=spec)
    role = run_roles("run", Cast.of(setup, get_strategy("adversarial")))[0]["drafter"]
    drafter = member("drafter", alive_nodes()[0], 0.0)
    request = DraftRequest(task=TASKS[0], round=0, sample=0, seed=1)
    assert ray.get(drafter.serve.remote(role.key, encode(request))) is None  # a run it does not know yet: ask again
    reply = ray.get(drafter.serve.remote(role.key, encode(request), role))
    assert isinstance(reply, bytes)
    draft = decode(reply)
    assert isinstance(draft, Draft) and draft.task_id == TASKS[0].task_id
    assert draft.node_id  # filled in by the actor, on a real node
    # A corrupt frame is refused by the actor and the ProtocolError reaches the caller.
    with pytest.raises(ProtocolError, match=r"at `\$.round`"):
        bad = encode(request).replace(b"\xa5round\x00", b"\xa5round\xa1x")
        ray.get(drafter.serve.remote(role.key, bad))  # the run's role is kept: no need to send it again
    with pytest.raises(ProtocolError, match="corrupt message"):
        ray.get(drafter.serve.remote(role.key, b"\xc1\xc1"))


def test_k_samples_of_a_round_run_concurrently(ray_cluster: Any, tmp_path: Path) -> None:
    delay = 1.0
    spec = ScriptedSpec(script=Clocked(), delay_s=delay)
    config = RunConfig.build(strategy="self_consistency", samples=4, limit=1, out=str(tmp_path / "run"))
    run(config, Plugins(backends={"drafter": spec, "critic": spec}))
    drafts = [m for m in iter_frames(trace_bytes(tmp_path / "run")) if isinstance(m, Draft)]
    starts = sorted(float(d.text.split("\n")[0].removeprefix("started=")) for d in drafts)
    assert len(starts) == 4
    # One after another, the last call would start >= 3 s after the first; in parallel
    # all four start before the first one's simulated latency is over.
    assert starts[-1] - starts[0] < delay, starts


def test_samples_spread_over_both_nodes_and_results_are_complete(
    ray_cluster: Any, node_ids: list[str], tmp_path: Path
) -> None:
    assert len(node_ids) == 2
    spec = ScriptedSpec(script=LateLearner(fix_at=1))
    out = tmp_path / "run"
    outcome = run(
        RunConfig.build(samples=2, max_rounds=3, limit=len(TASKS), out=str(out), max_tasks_in_flight=3),
        Plugins(backends={"drafter": spec, "critic": spec}),
    )
    trace = list(iter_frames(trace_bytes(out)))
    for task in TASKS:
        nodes = {m.node_id for m in trace if isinstance(m, Draft) and m.task_id == task.task_id and m.round == 0}
        assert nodes == set(node_ids), task.task_id
    records = result_records(out)
    assert sorted(r["task_id"] for r in records) == sorted(t.task_id for t in TASKS)
    assert all(r["passed"] and r["rounds"] == 2 and not r["initial_passed"] for r in records)
    assert [m.task_id for m in trace if isinstance(m, Result)] == [r["task_id"] for r in records]
    assert outcome.summary.tasks == len(TASKS) and outcome.summary.pass_rate == 1.0
    assert outcome.summary.initial_pass_rate == 0.0


def test_rerun_with_the_same_out_resumes_without_duplicates(ray_cluster: Any, tmp_path: Path) -> None:
    spec = ScriptedSpec(script=LateLearner(fix_at=1))
    out = tmp_path / "run"
    backends = {"drafter": spec, "critic": spec}
    first = run(RunConfig.build(samples=1, limit=3, out=str(out)), Plugins(backends=backends))
    assert first.summary.tasks == 3
    # Tear the last record as a killed writer would leave it.
    results = out / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    torn_id = json.loads(lines[-1])["task_id"]
    results.write_bytes(b"".join(lines[:-1]) + lines[-1][:25])
    second = run(RunConfig.build(samples=1, limit=len(TASKS), out=str(out)), Plugins(backends=backends))
    assert second.skipped == 2
    ids = [json.loads(line)["task_id"] for line in results.read_text().splitlines()]
    assert sorted(ids) == sorted(t.task_id for t in TASKS) and torn_id in ids
    assert second.summary.tasks == len(TASKS)
    # The trace was cut back with the torn record: each task's result appears once.
    trace_results = [m.task_id for m in iter_frames(trace_bytes(out)) if isinstance(m, Result)]
    assert sorted(trace_results) == sorted(ids)


def test_resume_refuses_a_different_configuration(ray_cluster: Any, tmp_path: Path) -> None:
    from redraft.errors import UserError

    spec = ScriptedSpec(script=LateLearner(fix_at=1))
    out = str(tmp_path / "run")
    run(RunConfig.build(samples=1, limit=1, out=out), Plugins(backends={"drafter": spec, "critic": spec}))
    with pytest.raises(UserError, match="another configuration"):
        run(RunConfig.build(samples=2, limit=1, out=out), Plugins(backends={"drafter": spec, "critic": spec}))


def test_a_role_that_cannot_start_fails_the_run_once_and_clearly(ray_cluster: Any, tmp_path: Path) -> None:
    from redraft.errors import BackendError

    spec = ScriptedSpec(script=LateLearner())
    with pytest.raises(BackendError, match=r"a role actor failed to start: .*model weights missing on this node"):
        run(
            RunConfig.build(limit=2, out=str(tmp_path / "run")),
            Plugins(backends={"drafter": spec, "critic": Unstartable()}),
        )
    assert (tmp_path / "run" / "results.jsonl").read_text() == ""  # no task was charged with it


def test_a_finished_run_resumed_starts_no_actor(ray_cluster: Any, tmp_path: Path) -> None:
    # A comparison reruns every lane; a finished one must cost nothing, not a fleet of idle actors.
    spec = ScriptedSpec(script=LateLearner())
    out = str(tmp_path / "run")
    first = run(RunConfig.build(samples=1, limit=2, out=out), Plugins(backends={"drafter": spec, "critic": spec}))
    again = run(
        RunConfig.build(samples=1, limit=2, out=out), Plugins(backends={"drafter": Unstartable(), "critic": spec})
    )
    assert (again.skipped, again.total) == (2, 2)  # the unstartable drafter was never started
    assert again.summary.tasks == 2 and again.summary.passed == first.summary.passed


@pytest.mark.parametrize("broken", [False, True], ids=["canonical", "broken"])
def test_humaneval_candidates_are_tested_in_the_sandbox_inside_verifier_actors(
    ray_cluster: Any, tmp_path: Path, broken: bool
) -> None:
    tasks = list(islice(get_scenario("humaneval").tasks(seed=0), 2))
    spec = ScriptedSpec(script=HumanEvalOracle.for_tasks(tasks, broken=broken))
    out = tmp_path / "run"
    outcome = run(
        RunConfig.build(scenario="humaneval", strategy="none", limit=2, out=str(out)),
        Plugins(backends={"drafter": spec, "critic": spec}),
    )
    assert outcome.summary.tasks == 2
    trace = list(iter_frames(trace_bytes(out)))
    verifications = [m for m in trace if isinstance(m, Verification)]
    assert len(verifications) == 2 and all(v.checks for v in verifications)
    # The feedback is the prompt's own examples (HumanEval/0 shows two, /1 one), run in the harness.
    names = {v.task_id: [c.name for c in v.checks] for v in verifications}
    assert names == {"HumanEval/0": ["example_1", "example_2"], "HumanEval/1": ["example_1"]}
    assert [v.passed for v in verifications] == [not broken] * 2
    if broken:  # each breaks on one example at least, which names the call and what came back
        assert all(any("returned None, expected" in c.detail for c in v.checks) for v in verifications)
    # The hidden tests are the held-out grade, run in the harness inside grader actors after the loop.
    grades = [g for m in trace if isinstance(m, Grade) for g in m.grades]
    assert len(grades) == 2 and all(g.passed is not broken for g in grades)
    if broken:
        assert all("AssertionError" in g.detail for g in grades)
    results = [m for m in trace if isinstance(m, Result)]
    assert [r.graded_pass for r in results] == [not broken] * 2


def test_refused_credentials_stop_the_whole_run_with_one_error(ray_cluster: Any, tmp_path: Path) -> None:
    from redraft.errors import AuthenticationError
    from tests.support.replies import refused

    spec = ScriptedSpec(script=refused)
    out = tmp_path / "run"
    with pytest.raises(AuthenticationError, match=r"rejected the API key \(401\)"):
        run(
            RunConfig.build(limit=len(TASKS), out=str(out), max_tasks_in_flight=2),
            Plugins(backends={"drafter": spec, "critic": spec}),
        )
    # No task was recorded as failed: after fixing the key, the same --out resumes from scratch.
    assert (out / "results.jsonl").read_text() == ""
    assert json.loads((out / "summary.json").read_text())["tasks"] == 0


def test_a_stop_request_ends_the_run_at_once_keeping_what_landed_and_a_rerun_resumes(
    ray_cluster: Any, tmp_path: Path
) -> None:
    import threading

    from redraft.errors import Interrupted

    spec = ScriptedSpec(script=LateLearner(fix_at=1), delay_s=0.3)
    out = tmp_path / "run"
    stop = threading.Event()
    config = RunConfig.build(samples=1, limit=len(TASKS), out=str(out), max_tasks_in_flight=2)
    landed: list[str] = []

    def on_result(result: Result) -> None:
        landed.append(result.task_id)
        stop.set()  # as a signal handler would, once the first task is in

    with pytest.raises(Interrupted, match=rf"interrupted: \d of {len(TASKS)} tasks done") as stopped:
        run(config, Plugins(backends={"drafter": spec, "critic": spec}), RunHooks(on_result=on_result, stop=stop))
    assert 1 <= stopped.value.done < len(TASKS) and stopped.value.total == len(TASKS)
    recorded = [json.loads(line)["task_id"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert recorded == landed  # what landed is kept, nothing in flight was written
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_by"] == "interrupted" and summary["tasks"] == len(recorded)
    again = run(config, Plugins(backends={"drafter": spec, "critic": spec}))
    assert again.skipped == len(recorded) and again.summary.tasks == len(TASKS)


class _Tally:
    """A shared service for the test below: it counts the calls it answered."""

    def __init__(self) -> None:
        self.calls = 0

    def ping(self) -> int:
        self.calls += 1
        return self.calls


@pytest.mark.ray
def test_a_shared_actor_that_died_with_its_maker_is_made_again_for_the_next_call(ray_cluster: Any) -> None:
    """A model host or rate limiter is made by whichever actor asks first, and dies with it (a drafter the
    fleet replaced, a comparison lane that ended): every other caller's next call must reach a new one."""
    import asyncio
    import time

    import ray

    from redraft.actors._ray import RayServices

    @ray.remote(num_cpus=0)
    class Maker:
        def make(self) -> Any:
            return RayServices().shared(_Tally, "test-tally-revived", per_node=False, num_cpus=0)

    maker = Maker.remote()  # type: ignore[attr-defined]
    shared = ray.get(maker.make.remote())
    services = RayServices()
    assert asyncio.run(services.call(shared, "ping")) == 1
    dead = shared.handle
    ray.kill(maker)  # its tally goes with it (once Ray has seen its maker die), whatever its restarts
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            ray.get(dead.ping.remote(), timeout=30)
        except ray.exceptions.RayActorError:
            break
        time.sleep(0.2)
    else:
        pytest.fail("the tally outlived its maker")
    assert asyncio.run(services.call(shared, "ping")) == 1  # a new tally, made by this caller
    assert shared.handle != dead
