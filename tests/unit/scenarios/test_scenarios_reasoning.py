"""reasoning_gym:NAME: real reasoning-gym data sets, scored by their own score_answer.

Skipped only when the optional package is absent (``pip install 'redraft[reasoning]'``;
the dev extra installs it).
"""

from __future__ import annotations

from itertools import islice

import pytest

from redraft.errors import UserError
from redraft.scenarios import Scenario, get_scenario

reasoning_gym = pytest.importorskip(
    "reasoning_gym", reason="reasoning-gym is not installed (optional extra: pip install 'redraft[reasoning]')"
)

DATASETS = ["leg_counting", "basic_arithmetic", "word_sorting"]


def entries(name: str, seed: int, n: int) -> list[dict[str, object]]:
    data = reasoning_gym.create_dataset(name, size=200, seed=seed)
    return [data[i] for i in range(n)]


@pytest.mark.parametrize("name", DATASETS)
def test_tasks_are_the_datasets_questions_and_depend_only_on_the_seed(name: str) -> None:
    scenario = get_scenario(f"reasoning_gym:{name}")
    assert isinstance(scenario, Scenario) and scenario.name == f"reasoning_gym:{name}"
    tasks = list(islice(scenario.tasks(seed=3), 5))
    assert [t.prompt for t in tasks] == [e["question"] for e in entries(name, 3, 5)]
    assert tasks == list(islice(get_scenario(f"reasoning_gym:{name}").tasks(seed=3), 5))
    assert [t.prompt for t in tasks] != [t.prompt for t in islice(scenario.tasks(seed=4), 5)]
    assert all(t.gold == {"dataset": name, "seed": 3, "index": i} and t.reference == {} for i, t in enumerate(tasks))


@pytest.mark.parametrize("name", DATASETS)
def test_the_datasets_own_checker_is_the_held_out_grade_and_the_feedback_only_asks_for_an_answer(name: str) -> None:
    scenario = get_scenario(f"reasoning_gym:{name}")
    tasks = list(islice(scenario.tasks(seed=0), 6))
    for task, entry in zip(tasks, entries(name, 0, 6), strict=True):
        gold = str(entry["answer"])
        right, wrong = f"Let me think.\n<answer>{gold}</answer>", "<answer>certainly not 424242</answer>"
        # Feedback has no gold: any given answer passes it, right or wrong.
        assert [(c.name, c.passed) for c in scenario.check(task, right)] == [("answer_given", True)]
        assert [(c.name, c.passed) for c in scenario.check(task, wrong)] == [("answer_given", True)]
        assert scenario.check(task.without_gold(), wrong) == scenario.check(task, wrong)
        good, bad = scenario.grade(task, right), scenario.grade(task, wrong)
        assert good is not None and (good.name, good.passed, good.score) == ("score_answer", True, 1.0), task.task_id
        assert bad is not None and not bad.passed and bad.score < 1.0
        assert scenario.grade(task.without_gold(), right) is None  # nothing to grade against: unknown, not 0
        assert scenario.answer(f"x <answer> {gold} </answer>") == " ".join(gold.split())


def test_an_answer_line_counts_and_a_missing_answer_says_how_to_give_one() -> None:
    scenario = get_scenario("reasoning_gym:leg_counting")
    task = next(iter(scenario.tasks(seed=0)))
    gold = entries("leg_counting", 0, 1)[0]["answer"]
    assert scenario.check(task, f"Counting legs...\nAnswer: {gold}")[0].passed
    verdict = scenario.grade(task, f"Counting legs...\nAnswer: {gold}")
    assert verdict is not None and verdict.passed
    missing = scenario.check(task, "I am not sure.")
    assert not missing[0].passed and "<answer>" in missing[0].detail
    for junk in ["", "<answer></answer>", "<answer>\x00{[</answer>"]:
        assert not scenario.check(task, junk)[0].passed


def test_an_unknown_dataset_is_one_line_naming_some_known_ones() -> None:
    with pytest.raises(UserError) as info:
        get_scenario("reasoning_gym:leg_countin")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("unknown reasoning-gym data set 'leg_countin' (did you mean leg_counting")
    assert "known: ab, acre," in message and "in all" in message
