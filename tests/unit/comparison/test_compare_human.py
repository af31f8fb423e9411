"""A comparison reports what people said of its arms, from the ``labels.jsonl`` files beside its lanes: a pass rate
per arm on the tasks people labelled (with its interval and how many were labelled), and a preference share per
pair of arms (ties counted half, and said); in comparison.json, its notes and its page, and on demand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from redraft import RunConfig
from redraft.comparison import HumanPreference, human_judgements, write
from redraft.comparison._arms import Arm
from redraft.comparison._runner import ComparePlan, lanes_in
from redraft.errors import UserError
from redraft.rundir import Label, Preference, answer_digest, append_label, append_preference, final_answers
from redraft.stats import wilson
from tests.unit.comparison.test_compare_feedback_basis import CHECK, lane

ARMS = ("adversarial", "self_refine")


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("human") / "cmp"
    base = RunConfig.build(scenario=CHECK, samples=2, max_rounds=2)
    arms = [Arm(name=name, settings={}) for name in ARMS]
    plan = ComparePlan(base=base, arms=arms, out=out, baseline_samples=3, repeats=2)
    for planned in plan.lanes():
        lane(out / planned.label, planned.config)
    return out


@pytest.fixture
def out(made: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(made, tmp_path / "cmp"))


def plan_of(out: Path) -> ComparePlan:
    base = RunConfig.build(scenario=CHECK, samples=2, max_rounds=2)
    return ComparePlan(base=base, arms=[Arm(name=n, settings={}) for n in ARMS], out=out, baseline_samples=3, repeats=2)


def label(directory: Path, task_id: str, text: str, verdict: str) -> None:
    append_label(directory, Label(task_id, "ana", verdict, answer_digest(text)))  # type: ignore[arg-type]


def test_the_lanes_are_read_from_the_folders_repeats_in_order(out: Path) -> None:
    assert lanes_in(out) == {
        "adversarial": [out / "arms" / "adversarial", out / "arms" / "adversarial@r1"],
        "self_refine": [out / "arms" / "self_refine", out / "arms" / "self_refine@r1"],
        "baseline": [out / "baseline"],
    }
    with pytest.raises(UserError, match="is not a comparison directory"):
        human_judgements(out / "arms" / "adversarial")


def test_nobody_s_judgement_is_no_figure(out: Path) -> None:
    assert human_judgements(out) is None


def test_an_arm_s_labelled_pass_rate_is_over_the_tasks_people_labelled_pooled_over_repeats(out: Path) -> None:
    first, again = out / "arms" / "adversarial", out / "arms" / "adversarial@r1"
    answers, answers_again = final_answers(first), final_answers(again)
    label(first, "t0", answers["t0"], "pass")
    label(again, "t0", answers_again["t0"], "fail")  # t0: passes on one repeat of two, 0.5
    label(first, "t1", answers["t1"], "fail")
    label(first, "t1", answers["t1"], "pass")  # the latest wins: t1 passes
    label(first, "t2", "an answer the arm no longer gives", "pass")  # not current: not counted
    label(out, "t3", answers["t3"], "fail")  # in the comparison's directory: counts for every arm giving that answer
    label(first, "t4", answers["t4"], "pass")
    label(out, "t4", answers["t4"], "fail")  # the lane's own label comes first (this one counts on repeat 1 only)
    judged = human_judgements(out)
    assert judged is not None
    rates = {rate.arm: rate for rate in judged.rates}
    adversarial = rates["adversarial"]
    assert answers_again["t3"] == answers["t3"] and answers_again["t4"] == answers["t4"]  # the same on repeat 1
    assert (adversarial.tasks, adversarial.answered, adversarial.labels) == (4, 6, 7)
    assert adversarial.pass_rate == pytest.approx((0.5 + 1 + 0 + 0.5) / 4)  # t0, t1, t3, t4
    assert (adversarial.ci.low, adversarial.ci.high) == pytest.approx(wilson(2.0, 4))
    gives_t3 = final_answers(out / "arms" / "self_refine")["t3"] == answers["t3"]
    assert ("self_refine" in rates) == gives_t3
    said = adversarial.said()
    assert "adversarial passes 50.0% of the 4 labelled tasks" in said and "4 of 6 answered tasks labelled" in said


def preference(out: Path, task_id: str, shown: tuple[str, str], choice: str) -> None:
    digests = tuple(answer_digest(final_answers(out / "arms" / arm)[task_id]) for arm in shown)
    append_preference(out, Preference(task_id, "bo", shown, digests, choice))  # type: ignore[arg-type]


def test_a_pair_s_preference_share_counts_ties_half_and_only_current_latest_preferences(out: Path) -> None:
    preference(out, "t0", ARMS, "A")  # adversarial
    preference(out, "t1", ARMS[::-1], "A")  # self_refine, shown first
    preference(out, "t2", ARMS, "tie")
    preference(out, "t3", ARMS, "B")
    preference(out, "t3", ARMS[::-1], "B")  # the latest for t3 and this pair: adversarial
    stale = Preference("t4", "bo", ARMS, (answer_digest("gone"), answer_digest("also gone")), "A")
    append_preference(out, stale)
    judged = human_judgements(out)
    assert judged is not None and judged.rates == [] and judged.stale == 1
    [share] = judged.preferences
    assert share == HumanPreference(
        a="adversarial", b="self_refine", tasks=4, a_wins=2, b_wins=1, ties=1, share=2.5 / 4, ci=share.ci
    )
    assert (share.ci.low, share.ci.high) == pytest.approx(wilson(2.5, 4))
    assert "adversarial preferred on 2, self_refine on 1, 1 tied; adversarial's share 62.5% (ties counted half" in (
        share.said()
    )


def test_the_comparison_records_and_shows_them_beside_its_other_figures(out: Path) -> None:
    answers = final_answers(out / "arms" / "self_refine")
    label(out / "arms" / "self_refine", "t0", answers["t0"], "pass")
    preference(out, "t0", ARMS, "tie")
    with open(out / "labels.jsonl", "ab") as damaged:
        damaged.write(b"{torn")
    done = write(plan_of(out), "calls")
    written = json.loads(done.json.read_text())
    assert written["human"]["rates"][0]["arm"] == "self_refine" and written["human"]["rates"][0]["tasks"] == 1
    assert written["human"]["preferences"][0]["ties"] == 1 and written["human"]["set_aside"] == 1
    notes = done.comparison.notes
    assert any(note.startswith("people's labels: self_refine passes 100.0% of the 1 labelled tasks") for note in notes)
    assert any(note.startswith("people's preferences: adversarial vs self_refine over 1 tasks") for note in notes)
    assert "people's judgements: 1 damaged line(s) of labels.jsonl skipped" in notes
    page = done.html.read_text()
    assert "people&#39;s labels: self_refine passes 100.0%" in page


def test_a_lane_not_yet_begun_has_no_answer_to_judge_and_costs_nothing_else(out: Path) -> None:
    (out / "arms" / "debate").mkdir()  # a comparison starting its lanes: the folder before the run
    answers = final_answers(out / "arms" / "adversarial")
    label(out, "t0", answers["t0"], "pass")
    judged = human_judgements(out)
    assert judged is not None and "debate" not in {rate.arm for rate in judged.rates}
    assert {rate.arm for rate in judged.rates} >= {"adversarial"}
