"""One fleet for a command's runs, on Ray: a comparison's lanes and a tune's evaluations get the same results
from one fleet as from a fleet each, with a seeded scripted model, and the shared one is started once; role
actors killed under a comparison's shared fleet change none of its results either.

The results compared are what a run decides (each task's text, scores, grades, rounds, stop reason and calls),
not its clocks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from redraft import Plugins, RunConfig, RunHooks, TunePlugins, TuneSettings, tune
from redraft.backends.scripted import ScriptedSpec
from redraft.comparison._arms import arms_from_names
from redraft.comparison._runner import ComparePlan, run_comparison
from redraft.rundir.reader import RunReader
from redraft.tuning._journal import TuneJournal
from tests.support import tune_world
from tests.support.chaos import Killer, in_thread, lines, wait_for

pytestmark = pytest.mark.ray


def watched_fleets(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The fleets made from now on, as they are made."""
    from redraft.actors import _leases
    from redraft.actors._fleet import Fleet

    made: list[Fleet] = []

    class Watched(Fleet):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_leases, "Fleet", Watched)
    return made


def decided(root: Path) -> dict[str, tuple[Any, ...]]:
    """What every run under ``root`` decided, task by task."""
    found = {}
    for results in sorted(root.rglob("results.jsonl")):
        for r in RunReader(results.parent).finished():
            found[f"{results.parent.relative_to(root)}/{r.task_id}"] = (
                r.text, r.score, r.passed, r.grade, r.initial_score, r.rounds, r.stop_reason, r.error,
                r.usage.calls, r.best_round, r.best_sample,
            )  # fmt: skip
    return found


def compared(out: Path) -> None:
    base = RunConfig.build(
        scenario="arithmetic", drafter="scripted:tests.support.replies:coin",
        critic="scripted:tests.support.replies:coin", samples=2, max_rounds=3, threshold=1.0, limit=12, seed=5,
    )  # fmt: skip
    run_comparison(ComparePlan(base=base, arms=arms_from_names("adversarial,self_refine"), out=out, baseline_samples=3))


@pytest.fixture(scope="module")
def reference(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, ...]]:
    """What a comparison's lanes decide, each on a fleet of its own."""
    out = tmp_path_factory.mktemp("fleet-per-run")
    with pytest.MonkeyPatch.context() as patch:
        fleets = watched_fleets(patch)
        patch.setenv("REDRAFT_FLEET", "per-run")
        compared(out)
    assert len(fleets) == 3  # a fleet per lane
    found = decided(out)
    assert len(found) == 36  # 3 lanes of 12 tasks
    return found


def test_a_comparison_s_lanes_decide_alike_on_one_fleet_and_on_a_fleet_each(
    reference: dict[str, tuple[Any, ...]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleets = watched_fleets(monkeypatch)
    monkeypatch.delenv("REDRAFT_FLEET", raising=False)  # shared, the default
    compared(tmp_path / "shared")
    assert len(fleets) == 1  # one for the three lanes
    assert decided(tmp_path / "shared") == reference
    assert not fleets[0].runs  # every lane closed on the fleet it leased


def test_role_actors_killed_under_a_shared_fleet_change_no_lane_s_results(
    ray_cluster: Any, reference: dict[str, tuple[Any, ...]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REDRAFT_FLEET", raising=False)
    out = tmp_path / "killed"
    thread, box = in_thread(lambda: compared(out))
    assert wait_for(lambda: lines(out / "arms" / "adversarial" / "results.jsonl") >= 2 or not thread.is_alive(), 300)
    with Killer(ray_cluster, every_s=2.0, most=6) as killer:  # bounded, so a slow machine ends
        thread.join(timeout=600)
    assert not thread.is_alive() and "error" not in box, box
    assert killer.kills[:1] == ["ArbiterActor"], killer.kills  # then each role that has a process, in turn
    assert decided(out) == reference  # every lane's every task, as undisturbed


def tuned(out: Path) -> Any:
    path = tune_world.write_tasks(out.parent / f"{out.name}-tasks.jsonl", 20)
    model = ScriptedSpec(script=tune_world.rule_follower)
    config = RunConfig.build(tasks=str(path), strategy="best_of_n", samples=1, max_rounds=1, out=str(out))
    settings = TuneSettings(sections=["draft_system"], minibatch=4, max_proposals=2, parallel=2)
    backends = {"drafter": model, "critic": model}
    plugins = TunePlugins(tune_world.check, tune_world.grade, backends, proposer=tune_world.reading_proposer)
    return tune(config, settings, plugins)


def test_a_tune_s_evaluations_share_one_fleet_and_score_as_with_a_fleet_each(
    ray_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDRAFT_FLEET", "per-run")
    alone = tuned(tmp_path / "alone")
    monkeypatch.setenv("REDRAFT_FLEET", "shared")
    fleets = watched_fleets(monkeypatch)
    shared = tuned(tmp_path / "shared")
    assert len(fleets) == 1 and not fleets[0].runs
    assert shared.verdict == alone.verdict and shared.verdict.significant  # the prompts differ run to run
    scores = [{k: e.figures for k, e in TuneJournal(t.out).evaluations.items()} for t in (alone, shared)]
    assert scores[0] == scores[1] and len(scores[0]) >= 5
    assert decided(tmp_path / "shared" / "evaluations") == decided(tmp_path / "alone" / "evaluations")


def test_a_run_whose_role_cannot_be_made_stops_alone_and_the_shared_fleet_serves_the_next(
    ray_cluster: Any, tmp_path: Path
) -> None:
    from redraft import run
    from redraft.actors import Fleets
    from redraft.errors import BackendError
    from tests.support.replies import LateLearner, Unstartable

    model = ScriptedSpec(script=LateLearner())
    fleets = Fleets(shared=True)
    try:
        first = run(
            RunConfig.build(limit=2, out=str(tmp_path / "a")),
            Plugins(backends={"drafter": model, "critic": model}),
            RunHooks(fleets=fleets),
        )
        with pytest.raises(BackendError, match=r"^a role actor failed to start: .*model weights missing on this node"):
            run(
                RunConfig.build(limit=2, out=str(tmp_path / "b")),
                Plugins(backends={"drafter": model, "critic": Unstartable()}),
                RunHooks(fleets=fleets),
            )
        assert (tmp_path / "b" / "results.jsonl").read_text() == ""  # no task was charged with it
        again = run(
            RunConfig.build(limit=2, out=str(tmp_path / "c")),
            Plugins(backends={"drafter": model, "critic": model}),
            RunHooks(fleets=fleets),
        )
        assert again.summary.tasks == 2 and again.summary.passed == first.summary.passed
        [fleet] = fleets._fleets  # one fleet served all three, and no run is left open on it
        assert not fleet.runs
    finally:
        fleets.shutdown()
