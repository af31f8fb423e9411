"""A shared fleet's size follows the work, on Ray: held with an idle time (as a server holds it), a fleet whose runs
have all ended stops once it stays unused that long, its actors dead; the next run starts a new one and decides
as the first did. A run that leases it before then finds it running."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from redraft import Plugins, RunConfig, RunHooks, run
from redraft.backends.scripted import ScriptedSpec
from redraft.scenarios import get_scenario
from tests.integration.test_shared_fleet import decided, watched_fleets
from tests.support.chaos import wait_for
from tests.support.replies import LateLearner

pytestmark = pytest.mark.ray


def _model() -> ScriptedSpec:
    return ScriptedSpec(script=LateLearner())


def _run(out: Path, fleets: Any) -> Any:
    model = _model()
    return run(
        RunConfig.build(limit=3, out=str(out)),
        Plugins(backends={"drafter": model, "critic": model}),
        RunHooks(fleets=fleets),
    )


def _actors(fleet: Any) -> list[Any]:
    return [*fleet.arbiters, *(h for members in fleet.members.values() for h in members if h is not None)]


def test_an_idle_fleet_stops_its_actors_and_the_next_run_starts_one_that_decides_alike(
    ray_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redraft.actors import Fleets
    from redraft.actors._ray import actor_state

    made = watched_fleets(monkeypatch)
    stopped: list[Any] = []
    idle = threading.Event()
    fleets = Fleets(shared=True, idle_s=0.01, on_stop=lambda fleet: (stopped.append(fleet), idle.set()))
    try:
        first = _run(tmp_path / "a", fleets)
        assert idle.wait(timeout=120)  # the run ended; the fleet stayed unused for its idle time
        assert stopped == made[:1] and not fleets._fleets
        actors = _actors(stopped[0])
        assert len(actors) >= 3  # an arbiter, a drafter and a critic per node
        assert wait_for(lambda: all(actor_state(a)[0] == "DEAD" for a in actors), 60), [actor_state(a) for a in actors]

        idle.clear()
        again = _run(tmp_path / "b", fleets)  # a new fleet, started for this run
        assert len(made) == 2 and again.summary.tasks == 3
        assert decided(tmp_path / "b") == {k.replace("a/", "b/", 1): v for k, v in decided(tmp_path / "a").items()}
        assert again.summary.passed == first.summary.passed
        assert idle.wait(timeout=120) and stopped == made
    finally:
        fleets.shutdown()


def test_a_run_leasing_a_fleet_within_its_idle_time_finds_it_running(
    ray_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redraft.actors import Fleets

    made = watched_fleets(monkeypatch)
    stopped: list[Any] = []
    fleets = Fleets(shared=True, idle_s=3600, on_stop=stopped.append)
    try:
        _run(tmp_path / "a", fleets)
        _run(tmp_path / "b", fleets)
        assert len(made) == 1 and fleets._fleets == made and not stopped  # one fleet served both
        assert list(fleets._timers) == made  # idle again since the second run ended
    finally:
        fleets.shutdown()
    assert not fleets._timers and not stopped  # shut down with its holder, not for being idle


def test_a_run_that_cannot_open_leaves_the_fleet_to_stop_once_idle(ray_cluster: Any, tmp_path: Path) -> None:
    from redraft.actors import Fleets
    from redraft.errors import BackendError
    from tests.support.replies import Unstartable

    idle = threading.Event()
    fleets = Fleets(shared=True, idle_s=0.01, on_stop=lambda _fleet: idle.set())
    try:
        with pytest.raises(BackendError, match=r"^a role actor failed to start: "):
            run(
                RunConfig.build(limit=3, out=str(tmp_path / "a")),
                Plugins(backends={"drafter": _model(), "critic": Unstartable()}),
                RunHooks(fleets=fleets),
            )
        assert idle.wait(timeout=120) and not fleets._fleets  # stopped, not left running for nobody
    finally:
        fleets.shutdown()


def test_a_served_configuration_lets_its_lease_go_when_idle_and_the_next_request_starts_a_fleet_again(
    ray_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``redraft serve --fleet-idle`` holds on Ray: a configuration with no request for the idle time lets its
    lease go, so the replica's fleet stops; the next request of it starts one and gets the same answer."""
    import asyncio

    from redraft.actors import FleetArbiters, Fleets
    from redraft.engine.resolution import resolve_run

    made = watched_fleets(monkeypatch)
    idle = threading.Event()
    task = next(iter(get_scenario("arithmetic").tasks(seed=0)))
    model = _model()
    served = resolve_run(
        RunConfig.build(samples=1, max_rounds=2), backends={"drafter": model, "critic": model}, task=task
    )
    engines = FleetArbiters(Fleets(shared=True, idle_s=0.2, on_stop=lambda _fleet: idle.set()))
    arbiter = engines.make(served)

    async def answer() -> list[Any]:
        return [m for checkpoint in [c async for c in arbiter.refine(task.without_gold())] for m in checkpoint.messages]

    async def twice() -> tuple[list[Any], bool, list[Any]]:  # one event loop, as a replica's
        first = await answer()
        stopped = await asyncio.to_thread(idle.wait, 120)  # no request for 0.2 s: the lease let go, the fleet stopped
        return first, stopped and not engines.fleets._fleets, await answer()

    try:
        first, stopped, again = asyncio.run(twice())
        assert stopped and len(made) == 2  # the second request started a fleet of its own
        assert [type(m) for m in again] == [type(m) for m in first] and again[-1].text == first[-1].text
    finally:
        engines.close()
