"""Chaos: a run survives what a cluster does to it, and ends as if nothing had happened.

Each test runs the same tasks as an undisturbed reference run (same seed, same
deterministic model server) while faults hit the session's cluster, then checks:
every task recorded exactly once, no task recorded with the machinery's failure
as its result, and every result equal to the reference's (answer, score, rounds,
stop reason, usage: a replayed reply keeps the usage it was paid with). What the
faults cost is what the server counted beyond the reference: the paid replays.
`benchmarks/chaos.py` runs the larger version and prints the table.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from redraft import RunConfig, run
from redraft.errors import ClusterError
from redraft.strategies import get_strategy
from tests.support.chaos import (
    Killer,
    arithmetic_server,
    differences,
    in_thread,
    infrastructure_errors,
    lines,
    records,
    role_pids,
    run_settings,
    wait_for,
)
from tests.support.fake_llm_servers import FakeLLMServer

pytestmark = pytest.mark.ray

TASKS = 48
IN_FLIGHT = 16


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with arithmetic_server(latency_s=0.1) as fake:
        yield fake


@pytest.fixture(scope="module")
def reference(ray_cluster: Any, server: FakeLLMServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("chaos") / "reference"
    before, started = len(server.requests), time.monotonic()
    run(RunConfig.build(**run_settings(server, out, TASKS, IN_FLIGHT)))
    recs = records(out)
    assert 0 < sum(r["passed"] for r in recs.values()) < TASKS  # a mix, so equality compares something
    return {
        "records": recs,
        "requests": len(server.requests) - before,
        "elapsed_s": time.monotonic() - started,
        "slowest_s": max(r["wall_s"] for r in recs.values()),
    }


STILL_S = 600.0
"""How long a disturbed run may write no task before it is taken for hung (its own stall window is 120 s or more:
a run that works ends, or stops itself, well within it)."""


def disturbed(server: FakeLLMServer, out: Path, fault: Any, at: int = TASKS // 5, **settings: Any) -> Any:
    """Start the run in a thread, call ``fault()`` once ``at`` tasks are written, wait for the end."""
    thread, box = in_thread(lambda: run(RunConfig.build(**run_settings(server, out, TASKS, IN_FLIGHT, **settings))))
    assert wait_for(lambda: lines(out / "results.jsonl") >= at or not thread.is_alive(), 120)
    fault()
    written, since = -1, time.monotonic()
    while thread.is_alive():  # a slow machine is not a hung run: only a run that writes nothing for long is
        thread.join(timeout=5)
        if (now := lines(out / "results.jsonl")) != written:
            written, since = now, time.monotonic()
        assert time.monotonic() - since < STILL_S, f"the run hung: no task written for {STILL_S:.0f} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def check_like_reference(out: Path, reference: dict[str, Any]) -> dict[str, dict[str, Any]]:
    recs = records(out)
    assert len(recs) == TASKS
    assert infrastructure_errors(recs) == 0, [r["error"] for r in recs.values() if r.get("error")]
    assert differences(recs, reference["records"]) == []
    return recs


def test_a_storm_of_kills_of_every_role_leaves_results_as_if_undisturbed(
    ray_cluster: Any, server: FakeLLMServer, reference: dict[str, Any], tmp_path: Path
) -> None:
    """A role actor SIGKILLed every 1.5 s, the storm rate (arbiters among them: before, a task's 4 attempts
    failing with no task finished meanwhile stopped the run), 8 times: on this 2-core machine a killed actor's
    restart can take longer than the storm leaves it, and the test must end."""
    out = tmp_path / "killed"
    before = len(server.requests)
    thread, box = in_thread(lambda: run(RunConfig.build(**run_settings(server, out, TASKS, IN_FLIGHT))))
    assert wait_for(lambda: lines(out / "results.jsonl") >= 3, 120)
    with Killer(ray_cluster, every_s=1.5, most=8) as killer:
        thread.join(timeout=900)
    assert not thread.is_alive() and "error" not in box, box
    assert killer.kills[:1] == ["ArbiterActor"], killer.kills  # then each role that has a process, in turn
    recs = check_like_reference(out, reference)
    retried = [r for r in recs.values() if r["attempts"] > 1]
    assert box["value"].summary.retried_tasks == len(retried)
    paid_replays = len(server.requests) - before - reference["requests"]
    kills = f"{len(killer.kills)} kills ({', '.join(killer.kills)})"
    print(f"\n{kills}: {len(retried)} tasks redone, {paid_replays} paid replays")


def dies_at_once(make: Callable[..., Any], killed: list[str], name: str, times: int = 1) -> Callable[..., Any]:
    """``make`` (a factory of the run's actors), whose first ``times`` actors are killed for good as soon as they
    are created: before the fleet awaits them, so Ray never runs them and will not restart them."""
    import ray

    from redraft.actors._ray import is_actor

    def made(*args: Any, **kwargs: Any) -> Any:
        handle = make(*args, **kwargs)
        if is_actor(handle) and killed.count(name) < times:
            killed.append(name)
            ray.kill(handle, no_restart=True)
        return handle

    return made


def watched_fleets(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The fleets the runs of this test build, as they are built."""
    from redraft.actors import _leases
    from redraft.actors._fleet import Fleet

    fleets: list[Fleet] = []

    class Watched(Fleet):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            fleets.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_leases, "Fleet", Watched)
    return fleets


def test_role_actors_killed_while_the_fleet_starts_are_started_again_and_the_run_completes(
    ray_cluster: Any, server: FakeLLMServer, reference: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redraft.actors import _factory

    killed: list[str] = []
    monkeypatch.setattr(_factory, "member", dies_at_once(_factory.member, killed, "drafter"))
    monkeypatch.setattr(_factory, "arbiter", dies_at_once(_factory.arbiter, killed, "arbiter"))
    fleets = watched_fleets(monkeypatch)
    out = tmp_path / "killed-at-start"
    run(RunConfig.build(**run_settings(server, out, TASKS, IN_FLIGHT)))
    assert killed == ["drafter", "arbiter"]  # the first member made (a drafter) and the first arbiter
    check_like_reference(out, reference)
    (fleet,) = fleets
    assert fleet.replaced >= 2  # the drafter rebuilt, the arbiter replaced
    assert fleet.disturbances >= 1  # the drafter's death: a task timing out meanwhile would be redone


def test_a_role_whose_every_member_dies_as_the_run_starts_stops_it_in_one_line(
    ray_cluster: Any, server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redraft.actors import _factory
    from redraft.actors._ray import actor_state, is_actor

    killed: list[str] = []
    monkeypatch.setattr(_factory, "member", dies_at_once(_factory.member, killed, "member", times=1000))
    fleets = watched_fleets(monkeypatch)
    out = tmp_path / "always-killed"
    with pytest.raises(ClusterError, match=r"^the \w+ (role|actor).*rerun with the same --out") as raised:
        run(RunConfig.build(**run_settings(server, out, 4, 4)))
    assert "\n" not in str(raised.value)
    assert lines(out / "results.jsonl") == 0
    assert len(killed) > len(ray_cluster.list_all_nodes())  # each slot was rebuilt before the run gave up
    (fleet,) = fleets
    started = [handle for ms in fleet.members.values() for handle in ms if is_actor(handle)] + fleet.arbiters
    assert wait_for(lambda: all(actor_state(handle)[0] == "DEAD" for handle in started), 60)  # none left behind


def test_a_worker_node_removed_mid_run_the_run_completes_on_the_rest(
    ray_cluster: Any, server: FakeLLMServer, reference: dict[str, Any], tmp_path: Path
) -> None:
    node = ray_cluster.add_node(num_cpus=1)
    ray_cluster.wait_for_nodes()
    out = tmp_path / "node-lost"
    disturbed(server, out, lambda: ray_cluster.remove_node(node))
    check_like_reference(out, reference)


def test_a_frozen_arbiter_and_a_frozen_drafter_are_killed_and_their_tasks_redone(
    ray_cluster: Any, server: FakeLLMServer, reference: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "frozen-actors"
    frozen: list[int] = []

    def freeze() -> None:
        pids = role_pids(ray_cluster)
        for role in ("ArbiterActor", "DrafterActor"):
            pid = min(p for p, r in pids.items() if r == role)
            os.kill(pid, signal.SIGSTOP)
            frozen.append(pid)

    # A timeout the undisturbed tasks never reach (a loaded machine slows them all), so that any cut in this run
    # is the frozen actors' doing; on a quiet machine it is shorter than the heartbeat's kill plus a restart.
    timeout = max(20.0, 2 * reference["slowest_s"])
    try:
        outcome = disturbed(server, out, freeze, task_timeout=timeout)  # it returns: no stall stopped it
    finally:
        for pid in frozen:  # if the fleet did not kill it, do not leave it stopped
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    recs = check_like_reference(out, reference)  # a task cut while it waited on the frozen drafter was redone
    assert outcome.summary.retries, "the frozen arbiter's tasks were redone"
    assert {c for r in recs.values() for c in r["retried_for"]} <= {"ActorDiedError", "CallTimeoutError"}


def test_a_frozen_server_trips_the_watchdog_and_the_tasks_are_redone(
    ray_cluster: Any, server: FakeLLMServer, reference: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "frozen-server"
    watchdog = max(5.0, 3 * reference["slowest_s"])  # past any undisturbed task, however loaded the machine

    def freeze_for_a_while() -> None:
        server.freeze()
        time.sleep(watchdog + 3)
        server.thaw()

    try:
        outcome = disturbed(server, out, freeze_for_a_while, task_watchdog=watchdog)
    finally:
        server.thaw()
    recs = check_like_reference(out, reference)
    assert outcome.summary.retries.get("CallTimeoutError", 0) > 0
    assert any("CallTimeoutError" in r["retried_for"] for r in recs.values())


def test_a_server_down_for_good_stops_the_run_in_one_line_and_a_rerun_resumes(
    ray_cluster: Any, server: FakeLLMServer, reference: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "down"
    settings = run_settings(server, out, 20, 8)
    server.fail_status = 500
    try:  # stopped by the breaker ("is down"), not by the stall window ("nothing succeeded for")
        with pytest.raises(ClusterError, match=r"openai-compatible:fake-model@http://127\.0\.0\.1:\d+/v1 is down"):
            run(RunConfig.build(**settings))
    finally:
        server.fail_status = None
    assert lines(out / "results.jsonl") == 0  # no task was charged with the outage
    run(RunConfig.build(**settings))
    recs = records(out)
    assert len(recs) == 20 and infrastructure_errors(recs) == 0
    assert differences(recs, {k: reference["records"][k] for k in recs}) == []


def test_a_member_restarted_in_place_unseen_by_its_callers_moves_the_fleets_disturbance_count(
    ray_cluster: Any,
) -> None:
    import ray

    from redraft.actors._factory import actor_roles
    from redraft.actors._fleet import Fleet
    from redraft.actors._ray import actor_state
    from redraft.backends.scripted import ScriptedSpec
    from redraft.engine.resolution import Cast, RoleSetup

    spec = ScriptedSpec(script=["Answer: 1"])
    setup = RoleSetup(scenario="arithmetic", drafter=spec, critic=spec)
    fleet = Fleet()
    fleet.heartbeat_s = 0.0  # every check is a heartbeat
    try:
        fleet.grow(actor_roles(Cast.of(setup, get_strategy("adversarial"))))
        fleet.check()
        fleet.check()
        assert fleet.disturbances == 0  # a quiet fleet
        drafter = fleet.members["drafter"][0]
        pid = ray.get(drafter.__ray_call__.remote(lambda _self: os.getpid()))
        os.kill(pid, signal.SIGKILL)  # not the fleet's doing: Ray restarts it and re-sends its calls
        assert wait_for(lambda: actor_state(drafter) == ("ALIVE", 1), 60)
        fleet.check()
        assert fleet.disturbances >= 1
    finally:
        fleet.shutdown()
