"""The judge: rubrics read and refused in one line, a grade's weighted score and pass, an invalid reply
costing only the grade, and pairwise verdicts asked in both orders with a flip counted as a tie."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from redraft.backends import ScriptedSpec
from redraft.engine.prompts import fenced
from redraft.errors import UserError
from redraft.judging import Judge, judge_prompts, load_rubric, reworded, rubric_of
from redraft.protocols.messages import Task
from tests.support import judges

RUBRIC = rubric_of(judges.RUBRIC)
TASK = Task(task_id="t", scenario="open", prompt="What is 6 times 7?")


def test_a_rubric_file_is_read_in_toml_or_json(tmp_path: Path) -> None:
    toml = tmp_path / "summary.toml"
    toml.write_text(
        'threshold = 0.5\n[[criteria]]\nname = "faithful"\ndescription = "d"\nweight = 3\n'
        '[[criteria.levels]]\nname = "yes"\nscore = 1.0\ndescription = "y"\n'
        '[[criteria.levels]]\nname = "no"\nscore = 0.0\ndescription = "n"\n'
    )
    (tmp_path / "r.json").write_text(json.dumps(judges.RUBRIC))
    read = load_rubric(toml)
    assert (read.name, read.threshold, read.criteria[0].weight) == ("summary", 0.5, 3.0)
    assert load_rubric(tmp_path / "r.json") == RUBRIC


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"threshold": 1.5}, "threshold"),
        ({"criteria": []}, "criteria"),
        ({"criteria": [judges.RUBRIC["criteria"][0]] * 2}, "two criteria share a name"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_wrong_rubric_is_one_line_naming_the_file(tmp_path: Path, change: dict[str, object], said: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(judges.RUBRIC | change))
    with pytest.raises(UserError, match=said) as raised:
        load_rubric(path)
    assert str(path) in str(raised.value) and "\n" not in str(raised.value)


def test_the_score_is_the_weighted_mean_of_the_levels_and_passes_at_the_threshold() -> None:
    assert RUBRIC.score({"correct": "good", "clear": "bad"}) == pytest.approx(2 / 3)
    assert not RUBRIC.passes(2 / 3) and RUBRIC.passes(0.7)


def test_rewordings_keep_the_criteria_and_levels_in_another_order() -> None:
    by_criteria, by_levels = reworded(RUBRIC)
    assert [c.name for c in by_criteria.criteria] == ["clear", "correct"]
    assert [lvl.name for lvl in by_levels.criteria[0].levels] == ["bad", "good"]
    assert by_levels.score({"correct": "good", "clear": "bad"}) == RUBRIC.score({"correct": "good", "clear": "bad"})


async def test_a_judge_grades_by_the_rubric_in_its_schema() -> None:
    backend = ScriptedSpec(judges.faithful)
    judge = Judge(backend, RUBRIC)
    right = await judge.grade(TASK, "CORRECT: 42")
    wrong = await judge.grade(TASK, "WRONG: 41")
    assert (right.score, right.passed, wrong.score, wrong.passed) == (1.0, True, 0.0, False)
    assert [(c.criterion, c.level) for c in right.criteria] == [("correct", "good"), ("clear", "good")]


async def test_the_judge_sees_the_task_rubric_and_answer_fenced_and_its_schema_names_only_known_levels() -> None:
    seen = []

    def reply(request):  # type: ignore[no-untyped-def]
        seen.append(request)
        return judges.faithful(request)

    await Judge(ScriptedSpec(reply), RUBRIC).grade(TASK, "CORRECT: 42 [END x]")
    texts = fenced(seen[0].messages[-1].content)
    assert texts[0] == TASK.prompt and texts[2] == "CORRECT: 42 [END x]" and "weight 2" in texts[1]
    answers = seen[0].json_schema["properties"]["criteria"]
    entries = [entry["properties"] for entry in answers["prefixItems"]]
    assert [(e["criterion"]["enum"], e["level"]["enum"]) for e in entries] == [
        (["correct"], ["good", "bad"]),
        (["clear"], ["good", "bad"]),
    ]  # each position one criterion, with its own levels: none graded twice, none left out
    assert answers["items"] is False and answers["minItems"] == answers["maxItems"] == 2
    assert seen[0].temperature == 0.0


@pytest.mark.parametrize(
    "reply",
    [
        "not json",
        json.dumps({"criteria": [{"criterion": "correct", "level": "great", "reason": "r"}]}),
        json.dumps({"criteria": [{"criterion": "correct", "level": "good", "reason": "r"}]}),  # clear left out
    ],
)
async def test_an_invalid_reply_costs_the_grade_not_a_zero(reply: str) -> None:
    judgment = await Judge(ScriptedSpec([reply]), RUBRIC).grade(TASK, "CORRECT")
    assert judgment.score is None and judgment.passed is None and judgment.error


async def test_a_pair_is_judged_in_both_orders_and_a_faithful_verdict_stands() -> None:
    judge = Judge(ScriptedSpec(judges.faithful), RUBRIC)
    assert (await judge.compare(TASK, "CORRECT 42", "WRONG 41")).winner == "a"
    verdict = await judge.compare(TASK, "WRONG 41", "CORRECT 42")
    assert (verdict.winner, verdict.flipped, verdict.orders) == ("b", False, ("b", "b"))
    assert verdict.usage.calls == 2


async def test_a_verdict_that_follows_the_order_is_a_tie_and_says_it_flipped() -> None:
    verdict = await Judge(ScriptedSpec(judges.first), RUBRIC).compare(TASK, "CORRECT 42", "WRONG 41")
    assert (verdict.winner, verdict.flipped, verdict.orders) == ("tie", True, ("a", "b"))


async def test_the_pair_prompt_shows_the_answers_swapped_the_second_time() -> None:
    backend = ScriptedSpec(judges.faithful)
    judge = Judge(backend, RUBRIC)
    seen = []

    def reply(request):  # type: ignore[no-untyped-def]
        seen.append(fenced(request.messages[-1].content)[1:])
        return judges.faithful(request)

    await Judge(ScriptedSpec(reply), RUBRIC).compare(TASK, "one", "two")
    assert sorted(seen) == [["one", "two"], ["two", "one"]]
    assert judge.spec == "scripted"


def test_the_judge_prompts_are_versioned() -> None:
    assert set(judge_prompts().versions()) == {
        "judge_rubric_system",
        "judge_rubric_user",
        "judge_pair_system",
        "judge_pair_user",
    }
