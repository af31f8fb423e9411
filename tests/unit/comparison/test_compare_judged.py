"""A comparison graded by a judge: its pass rates are the judge's, it names the judge and its card, it measures how
much the judge disagreed with itself, its baseline's every sample is judged, and a gate refuses to rest on a judge
without a passing card unless told to trust it, in one line, before anything runs.

The lanes are written in this process (no Ray) by the scripted model of test_compare_feedback_basis.py; the
judge is a scripted one that decides by the answer's parity, noisily across seeds."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from redraft import RunConfig
from redraft.backends import ChatRequest
from redraft.cli import _compare
from redraft.comparison._analysis import Comparison
from redraft.comparison._arms import Arm
from redraft.comparison._judged import JudgeNote, judge_note, untrusted
from redraft.comparison._result import build
from redraft.comparison._runner import ComparePlan
from redraft.engine._refine import refine_trace
from redraft.engine.grader import Grader
from redraft.engine.prompts import fenced
from redraft.engine.resolution import arbiter_settings, grader_constructor, resolve_run
from redraft.judging import Figure, JudgeCard, Thresholds, judge_prompts, write_card
from redraft.protocols.messages import Result, Usage, encode
from redraft.rundir import RunStore
from redraft.rundir.reader import RunReader
from tests.support import judges
from tests.support.fake_llm_servers import FakeLLMServer
from tests.support.harness import scripted_arbiter
from tests.support.resolved import manifest_for
from tests.unit.comparison.test_compare_feedback_basis import CHECK, TASKS, lane, model
from tests.unit.test_cli import in_process

JUDGE = "scripted:tests.unit.comparison.test_compare_judged:parity"


def parity(request: ChatRequest) -> str:
    """Passes an answer whose number is even; one judgment in five, by seed, says the opposite."""
    candidate = fenced(request.messages[-1].content)[2]
    even = int(candidate.split()[-1]) % 2 == 0
    noisy = random.Random(f"{request.seed}\0{candidate}").random() < 0.2
    level = "good" if even != noisy else "bad"
    return json.dumps(
        {"criteria": [{"criterion": c, "level": level, "reason": "r"} for c in judges._criteria(request)]}
    )


@pytest.fixture
def rubric(tmp_path: Path) -> Path:
    path = tmp_path / "test.json"
    path.write_text(json.dumps(judges.RUBRIC))
    return path


def judged_lane(root: Path, config: RunConfig, tasks: list[Any] = TASKS) -> None:
    """A lane of ``config`` written here, each task graded by the config's judge."""
    store = RunStore.open(root, manifest_for(config, root.name))
    arbiter = scripted_arbiter(model, arbiter_settings(config), scenario=CHECK)
    run = resolve_run(config, task=tasks[0])
    cls, args, kwargs = grader_constructor(run.setup)
    for task in tasks:
        trace = asyncio.run(
            refine_trace(
                arbiter,
                Grader(CHECK),
                task,
                judge=cls(*args, **kwargs),
                prices=run.settings.prices,
                every_sample=config.experiment.max_rounds == 1,
            )
        )
        result = trace[-1]
        assert isinstance(result, Result)
        store.append([encode(m) for m in trace], result)
    store.finish(1.0)


def test_a_judged_comparison_rests_on_the_judge_and_names_it(tmp_path: Path, rubric: Path) -> None:
    base = RunConfig.build(scenario=CHECK, samples=2, max_rounds=2, judge=JUDGE, rubric=str(rubric), judge_repeats=3)
    plan = ComparePlan(base=base, arms=[Arm(name="adversarial", settings={})], out=tmp_path, baseline_samples=3)
    for planned in plan.lanes():
        judged_lane(tmp_path / planned.label, planned.config)
    judge = resolve_run(base, task=TASKS[0]).setup.judge
    assert judge is not None
    comparison: Comparison = build(plan, "calls", (judge, None, None))
    assert comparison.basis == "grade" and comparison.rate_name == "judged pass rate"
    assert comparison.rate_source == f"held out, judged by {JUDGE} by 'test'; no card"
    note = comparison.judge
    assert note is not None and (note.judge, note.rubric, note.repeats, note.self_judged) == (JUDGE, "test", 3, False)
    assert note.card_passed is None and untrusted(note) is not None
    assert note.disagreement is not None and 0 < note.disagreement < 1  # one judgment in five flips
    [arm] = comparison.arms
    assert arm.tasks == len(TASKS) and 0 < arm.pass_rate < 1  # the judge's verdicts, not the feedback's 100 %
    curve = comparison.baselines[0]
    assert curve.samples == 3  # every sample of the baseline was judged: its curves reach N
    # matched on the method's own calls: a baseline sample is one draft, its 3 judgments no part of its cost
    assert curve.mean_calls_per_sample == 1.0
    lanes = {planned.label: RunReader(tmp_path / planned.label) for planned in plan.lanes()}
    spent = [e.result for e in lanes[next(iter(lanes))].entries()]
    assert all(r.usage_by_role["judge"].calls > 0 for r in spent)  # the judge was paid, and is left out


def card(passed: bool, judge: str = JUDGE, rubric: str = "test") -> JudgeCard:
    kappa = Figure(value=0.31, low=0.1, high=0.5, threshold=0.6, passed=passed, n=40, side="at_least")
    return JudgeCard(
        judge=judge,
        rubric=rubric,
        prompts=judge_prompts().versions(),
        passed=passed,
        figures={"kappa": kappa},
        answers=40,
        labelled=40,
        pairs=0,
        invalid=0,
        thresholds=Thresholds(),
        seed=0,
    )


def note(given: JudgeCard | None, rubric: Path) -> JudgeNote:
    judge = resolve_run(RunConfig.build(scenario="arithmetic", judge=JUDGE, rubric=str(rubric))).setup.judge
    assert judge is not None
    return judge_note(judge, given, None if given is None else Path("judge-card.json"), [])


def test_a_gate_may_rest_only_on_a_card_that_passed_and_measured_this_judge(rubric: Path) -> None:
    assert untrusted(note(card(passed=True), rubric)) is None
    no_card = untrusted(note(None, rubric))
    assert no_card is not None and "which has no card: measure it with `redraft judge calibrate`" in no_card
    failed = untrusted(note(card(passed=False), rubric))
    assert failed is not None and "it failed: kappa 0.31, its low end 0.10 (needs at least 0.6)" in failed
    other = untrusted(note(card(passed=True, judge="openai:gpt-4o"), rubric))
    assert other is not None and f"it measured the judge openai:gpt-4o by the rubric 'test', not {JUDGE}" in other
    for line in (no_card, failed, other):
        assert "\n" not in line and line.endswith(("--trust-judge to gate on it unmeasured", "gate on it anyway"))
    assert untrusted(None) is None  # the scenario's own grade needs no card


# ---------------------------------------------------------------- the command


def compare_args(out: Path, tasks: Path, *extra: str) -> list[str]:
    return [
        "compare",
        *("--tasks", str(tasks), "--check", CHECK.removeprefix("check:"), "--arms", "adversarial"),
        *("--samples", "2", "--max-rounds", "2", "--baseline-samples", "3", "--limit", "6", "--out", str(out)),
        *extra,
    ]


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        "".join(json.dumps({"id": t.task_id, "prompt": t.prompt, "reference": t.reference}) + "\n" for t in TASKS)
    )
    return path


@pytest.fixture
def lanes_here(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each lane written in this process, graded by its judge when it has one; the lanes' labels as run."""
    ran: list[str] = []

    def write_lanes(plan: ComparePlan, **hooks: Any) -> dict[str, Any]:
        for planned in plan.lanes():
            ran.append(planned.label)
            tasks = TASKS[: plan.base.runtime.limit]
            if planned.config.experiment.judge is None:
                lane(plan.out / planned.label, planned.config, tasks=tasks)
            else:
                judged_lane(plan.out / planned.label, planned.config, tasks=tasks)
        return {}

    monkeypatch.setattr(_compare, "run_comparison", write_lanes)
    return ran


def test_fail_if_worse_refuses_a_judge_without_a_passing_card_before_anything_runs(
    tmp_path: Path, tasks: Path, rubric: Path, lanes_here: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert in_process(*compare_args(tmp_path / "old", tasks)) == 0
    old = str(tmp_path / "old" / "comparison.json")
    lanes_here.clear()
    capsys.readouterr()
    judged = ("--judge", JUDGE, "--rubric", str(rubric), "--baseline", old, "--fail-if-worse")
    assert in_process(*compare_args(tmp_path / "new", tasks, *judged)) != 0
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "which has no card" in said[0] and lanes_here == []  # refused, nothing ran
    failed = tmp_path / "card"
    write_card(card(passed=False), failed)
    assert in_process(*compare_args(tmp_path / "new", tasks, *judged, "--judge-card", str(failed))) != 0
    assert "does not vouch for them: it failed: kappa 0.31" in capsys.readouterr().err and lanes_here == []


def test_trust_judge_lets_the_gate_rest_on_it_and_the_comparison_names_judge_and_card(
    tmp_path: Path, tasks: Path, rubric: Path, lanes_here: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps(judges.RUBRIC | {"name": "other"}))
    assert in_process(*compare_args(tmp_path / "old", tasks, "--judge", JUDGE, "--rubric", str(other))) == 0
    old = str(tmp_path / "old" / "comparison.json")
    failed = tmp_path / "card"
    write_card(card(passed=False), failed)
    judged = ("--judge", JUDGE, "--rubric", str(rubric), "--baseline", old, "--judge-card", str(failed))
    capsys.readouterr()
    assert in_process(*compare_args(tmp_path / "new", tasks, *judged, "--fail-if-worse", "--trust-judge")) in (0, 4)
    err = capsys.readouterr().err
    assert (
        f"the baseline comparison was graded by the judge {JUDGE} by the rubric 'other', this one by the judge "
        f"{JUDGE} by the rubric 'test': a difference may be the graders', not the arms'"
    ) in err
    written = json.loads((tmp_path / "new" / "comparison.json").read_text())
    assert written["judge"]["judge"] == JUDGE and written["judge"]["card_passed"] is False
    assert written["judge"]["card"] == str(failed) and "kappa" in written["judge"]["card_says"]
    assert written["gate"] is not None  # the gate rested on the judge, as told
    page = (tmp_path / "new" / "comparison.html").read_text()
    assert f"Every grade is a judge's: <b>{JUDGE}</b> by the rubric test" in page
    assert "does not vouch for it</b>: it failed: kappa 0.31" in page
    lane_report = (tmp_path / "new" / "arms" / "adversarial" / "report.html").read_text()
    assert f"judge {JUDGE} by test" in lane_report  # each lane's report names who graded it


# ---------------------------------------------------------------- pairwise verdicts between arms


def right_one(request: ChatRequest) -> str:
    """Grades as `parity`; of two answers, prefers the right sum, whatever the order (a tie when both are)."""
    if (request.json_schema or {}).get("title") == "grade":
        return parity(request)
    task, first, second = fenced(request.messages[-1].content)
    right = str(int(task.split()[2]) + 1)
    a, b = first.endswith(right), second.endswith(right)
    return json.dumps({"winner": "tie" if a == b else "first" if a else "second", "reason": "r"})


def test_pairwise_verdicts_count_wins_ties_and_flips_in_both_orders(tmp_path: Path, rubric: Path) -> None:
    from redraft.comparison._pairwise import pairwise

    arms = [
        Arm(name="revised", settings={"strategy": "adversarial"}),
        Arm(name="first_draft", settings={"max_rounds": 1}),
    ]
    base = RunConfig.build(scenario=CHECK, samples=2, max_rounds=2, judge=JUDGE, rubric=str(rubric))
    plan = ComparePlan(base=base, arms=arms, out=tmp_path, baseline_samples=3)
    for planned in plan.lanes():
        judged_lane(tmp_path / planned.label, planned.config)
    fair = resolve_run(base.replace(judge=JUDGE.replace(":parity", ":right_one")), task=TASKS[0]).setup.judge
    assert fair is not None
    [figures] = pairwise(plan, fair)
    odd = len([t for t in TASKS if int(t.task_id[1:]) % 2])  # wrong in round 0, right once revised
    assert (figures.a, figures.b, figures.pairs) == ("revised", "first_draft", len(TASKS))
    assert (figures.a_wins, figures.b_wins, figures.ties, figures.flips) == (odd, 0, len(TASKS) - odd, 0)
    assert figures.difference.mean == pytest.approx(odd / len(TASKS)) and figures.usage.calls == 2 * len(TASKS)
    first = resolve_run(base.replace(judge="scripted:tests.support.judges:first"), task=TASKS[0]).setup.judge
    assert first is not None
    [biased] = pairwise(plan, first)  # prefers whatever it is shown first: every verdict flips, a tie
    assert (biased.a_wins, biased.b_wins, biased.ties, biased.flips) == (0, 0, len(TASKS), len(TASKS))
    assert biased.difference.mean == 0 and not biased.difference.significant
    said = "revised better on 0, first_draft on 0, 6 tied (6 of them verdicts that flipped with the order)"
    assert said in biased.said()


def test_pairwise_or_a_judge_card_without_a_judge_is_refused_in_one_line(
    tmp_path: Path, tasks: Path, lanes_here: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert in_process(*compare_args(tmp_path / "out", tasks, "--pairwise")) != 0
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [
        "redraft: error: --pairwise asks the comparison's judge to compare the arms: give --judge MODEL with it"
    ]
    assert lanes_here == []
    assert in_process(*compare_args(tmp_path / "out", tasks, "--judge-card", str(tmp_path))) != 0
    assert "--judge-card is the card of the comparison's judge" in capsys.readouterr().err and lanes_here == []


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    """A priced judge model behind the real SDK (the suite's fake server on 127.0.0.1)."""
    with FakeLLMServer() as fake:
        fake.model, fake.reply_for = "gpt-4o", judges.openai_body_judge
        yield fake


def test_the_pairwise_judgments_are_priced_as_the_comparison_s_grading_cost_apart_from_the_arms(
    tmp_path: Path,
    tasks: Path,
    rubric: Path,
    server: FakeLLMServer,
    lanes_here: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"gpt-4o": {"input": 1000.0, "output": 4000.0}}))
    fair = f"openai-compatible:gpt-4o@{server.openai_base_url}"
    judged = ("--judge", fair, "--rubric", str(rubric), "--prices", str(prices))

    def two_arms(out: Path, *extra: str) -> list[str]:
        args = compare_args(out, tasks, *judged, *extra)
        return [*args[: args.index("--arms") + 1], "adversarial,self_refine", *args[args.index("--arms") + 2 :]]

    assert in_process(*two_arms(tmp_path / "plain")) in (0, 4)
    assert in_process(*two_arms(tmp_path / "paired", "--pairwise")) in (0, 4)
    said = capsys.readouterr().out
    plain = json.loads((tmp_path / "plain" / "comparison.json").read_text())
    paired = json.loads((tmp_path / "paired" / "comparison.json").read_text())
    [pair] = paired["pairwise"]
    grading = paired["grading"]  # the judge's grades of every lane's tasks, and the pairs
    lanes = [RunReader(p.parent) for p in (tmp_path / "paired").rglob("results.jsonl")]
    graded = sum((e.result.usage_by_role["judge"] for lane in lanes for e in lane.entries()), Usage())
    assert len(lanes) == 3 and graded.calls > 0 and plain["grading"]["cost_usd"] > 0  # 2 arms, 1 baseline
    assert grading["calls"] - graded.calls == pair["usage"]["calls"] == 2 * pair["pairs"] > 0  # both orders
    assert grading["cost_usd"] - graded.cost_usd == pytest.approx(pair["usage"]["cost_usd"])
    assert pair["usage"]["cost_usd"] > 0 and pair["unpriced"] == []
    expected = (grading["input_tokens"] * 1000.0 + grading["output_tokens"] * 4000.0) / 1e6
    assert grading["cost_usd"] == pytest.approx(expected)  # priced by the comparison's own table
    spend = ("total_calls", "total_usd", "mean_usd", "compared_cost")
    assert [[a[k] for k in spend] for a in paired["arms"]] == [[a[k] for k in spend] for a in plain["arms"]]
    assert paired["baselines"] == plain["baselines"]  # the arms' spend, and the baselines matched to it, untouched
    assert sum(a["total_usd"] for a in paired["arms"]) == 0  # a free drafter: the judge's grades are not in it
    pairs = f"{pair['usage']['calls']} of them the pairwise judgments"
    line = f"grading: the judge cost ${grading['cost_usd']:.4f} over {grading['calls']} calls, {pairs}"
    assert line in " ".join(said.split()) and line in paired["notes"][-1]  # the terminal wraps it
    assert line in (tmp_path / "paired" / "comparison.html").read_text()
