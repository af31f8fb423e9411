"""A comparison's arms: from names or a TOML file, every fault named by file, arm and field before anything runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from redraft import RunConfig
from redraft.comparison._arms import arms_from_file, arms_from_names
from redraft.comparison._runner import BASELINE, ComparePlan
from redraft.errors import UserError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "arms.toml"
    path.write_text(text)
    return path


def test_arms_from_names_and_from_a_file() -> None:
    assert [(a.name, a.settings) for a in arms_from_names("adversarial, self_refine")] == [
        ("adversarial", {"strategy": "adversarial"}),
        ("self_refine", {"strategy": "self_refine"}),
    ]


def test_a_file_gives_each_arm_its_settings_and_the_baseline_its_n(tmp_path: Path) -> None:
    arms, baseline = arms_from_file(
        write(
            tmp_path,
            '[arms.adv]\nstrategy = "adversarial"\n\n[arms.debate-2]\nstrategy = "debate"\nsamples = 2\n'
            'critic = "scripted:tests.support.replies:always_seven"\npatch = true\n\n[baseline]\nsamples = 12\n',
        )
    )
    assert [(a.name, a.settings) for a in arms] == [
        ("adv", {"strategy": "adversarial"}),
        (
            "debate-2",
            {
                "strategy": "debate",
                "samples": 2,
                "critic": "scripted:tests.support.replies:always_seven",
                "patch": True,
            },
        ),
    ]
    assert baseline == {"samples": 12}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[arms.a]\nstratgy = 'adversarial'\n",
            "arm 'a': unknown field 'stratgy' (did you mean 'strategy'? known: calls_per_task, critic, ",
        ),
        ("[arms.a]\nstrategy = 'adversarial'\nsamples = 0\n", "arm 'a': --samples must be in [1, 1,000], got 0"),
        ("[arms.a]\nstrategy = 'adversarial'\nsamples = 'three'\n", "arm 'a': field 'samples': Expected `int`"),
        ("[arms.a]\nstrategy = 'adversarial'\nscenario = 'sql'\n", "arm 'a': 'scenario' is the comparison's"),
        ("[arms.a]\nsamples = 2\n", "arm 'a': missing field 'strategy'"),
        ("[arms]\n", "no arms"),
        ("[arms.'a b']\nstrategy = 'none'\n", "arm name 'a b' must be letters"),
        ("[armz.a]\nstrategy = 'none'\n", "unknown table 'armz'"),
        ("[arms.a\n", "not valid TOML"),
        ("[arms.a]\nstrategy = 'none'\n[baseline]\nk = 3\n", "[baseline] takes only 'samples'"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_arm_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UserError) as raised:
        arms_from_file(path)
    assert message in str(raised.value) and str(path) in str(raised.value) and "\n" not in str(raised.value)


def test_the_plan_runs_each_arm_and_repeat_in_its_own_folder_and_one_baseline(tmp_path: Path) -> None:
    base = RunConfig.build(scenario="arithmetic", limit=5, samples=3, max_tasks_in_flight=12)
    plan = ComparePlan(base=base, arms=arms_from_names("adversarial,self_refine"), out=tmp_path, repeats=2)
    lanes = plan.lanes()
    assert [lane.label for lane in lanes] == [
        "arms/adversarial",
        "arms/self_refine",
        "arms/adversarial@r1",
        "arms/self_refine@r1",
        BASELINE,
    ]
    assert {lane.config.runtime.limit for lane in lanes} == {5}  # the same tasks everywhere
    assert [lane.config.experiment.repeat for lane in lanes] == [0, 0, 1, 1, 0]
    assert sum(lane.config.runtime.max_tasks_in_flight or 0 for lane in lanes) <= 12
    baseline = lanes[-1].config.experiment
    assert (baseline.strategy, baseline.samples, baseline.max_rounds) == ("self_consistency", 16, 1)
    assert lanes[0].config.runtime.out == str(tmp_path / "arms" / "adversarial")
    assert [lane.label for lane, _ in plan.resolved()] == [lane.label for lane in lanes]
    with pytest.raises(UserError, match="arm 'adversarial': --max-rounds must be"):
        ComparePlan(base=base.replace(max_rounds=0), arms=plan.arms, out=tmp_path).resolved()


def test_an_arm_of_an_unknown_strategy_is_refused_before_anything_runs(tmp_path: Path) -> None:
    base = RunConfig.build(scenario="arithmetic", limit=1)
    plan = ComparePlan(base=base, arms=arms_from_names("adversarial,self-refine"), out=tmp_path)
    with pytest.raises(UserError) as raised:
        plan.resolved()
    assert str(raised.value).startswith(
        "arm 'self-refine': unknown strategy 'self-refine' (did you mean 'self_refine'? known: adaptive, adversarial, "
    )


def test_lanes_side_by_side_split_each_nodes_cpu_between_their_checking_actors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a 2-CPU machine, four humaneval lanes whose sandboxed verifiers each reserved a whole CPU left two lanes
    unplaceable until the actors' start deadline failed the comparison. With one fleet for the lanes, their
    verifiers are one per node, and it reserves a whole CPU."""
    from redraft.actors import RunHooks
    from redraft.actors._placement import cpus_of
    from redraft.comparison import _runner
    from redraft.engine.resolution import ResolvedRun, resolve_run

    shares: list[tuple[float, bool]] = []

    def run(resolved: ResolvedRun, hooks: RunHooks) -> None:
        assert hooks.fleets is not None
        shares.append((hooks.cpu_share, hooks.fleets.shared))

    monkeypatch.setattr(_runner, "run_resolved", run)
    monkeypatch.setattr(_runner, "ensure_ray", lambda *args, **kwargs: None)
    base = RunConfig.build(scenario="humaneval", limit=1)
    plan = ComparePlan(base=base, arms=arms_from_names("none,self_consistency,adversarial"), out=tmp_path)
    monkeypatch.setenv("REDRAFT_FLEET", "per-run")
    _runner.run_comparison(plan)
    assert shares == [(0.25, False)] * 4  # three arms and the baseline, a fleet each
    shares.clear()
    monkeypatch.delenv("REDRAFT_FLEET")
    _runner.run_comparison(plan)
    assert shares == [(1.0, True)] * 4  # one fleet for the four
    setup = resolve_run(base).setup
    assert cpus_of(setup, "verifier") == 1.0  # a run alone reserves a whole CPU for each
    shared = dataclasses.replace(setup, cpu_share=0.25)
    assert (cpus_of(shared, "verifier"), cpus_of(shared, "drafter")) == (0.25, 0.0)
