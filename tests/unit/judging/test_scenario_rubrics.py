"""A scenario's own rubric: found for a judge by the scenario, held to the rubric format, the default of
``redraft judge calibrate --scenario``; incident's weighs the program grade's items, so the program's verdicts
label a judge's card there; a scenario with no program grade and answers with no label is refused in one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from redraft.backends import ScriptedSpec
from redraft.cli import main
from redraft.errors import UserError
from redraft.judging import Judge, scenario_rubric
from redraft.protocols.messages import Task
from redraft.scenarios import Scenario, get_scenario, scenario, scenario_names
from redraft.scenarios._base import SCENARIOS
from tests.support import judges
from tests.unit.scenarios.test_incident import TASKS, by_difficulty, graded, incident_of, summary_of
from tests.unit.scenarios.test_incident import _wrong as wrong_facts

BUILT_IN = [n for n in scenario_names() if not n.startswith(("check", "reasoning_gym"))]


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_built_in_rubric_is_a_valid_one_named_after_its_scenario(name: str) -> None:
    rubric = scenario_rubric(get_scenario(name))
    if name in ("incident", "cited_answer"):
        assert rubric is not None and rubric.name == name
    else:
        assert rubric is None  # a scenario without a rubric of its own has none


@pytest.fixture
def registry() -> Iterator[None]:
    SCENARIOS.names()
    kept = dict(SCENARIOS._entries)
    yield
    SCENARIOS._entries.clear()
    SCENARIOS._entries.update(kept)


def test_a_scenario_whose_rubric_is_not_one_is_refused_in_one_line_naming_it(registry: None) -> None:
    @scenario("bad_rubric")
    class BadRubric(Scenario):
        def tasks(self, *, seed: int) -> Iterator[Task]:
            return iter([])

        def system_prompt(self) -> str:
            return ""

        def answer(self, text: str) -> str | None:
            return None

        def check(self, task: Task, text: str) -> list[Any]:
            return []

        def rubric(self) -> dict[str, Any]:
            return {"criteria": [], "threshold": 2}

    with pytest.raises(UserError, match="scenario 'bad_rubric''s rubric: ") as raised:
        scenario_rubric(get_scenario("bad_rubric"))
    assert "\n" not in str(raised.value)


def test_the_incident_rubric_weighs_the_grade_s_items_as_the_program_does() -> None:
    rubric = scenario_rubric(get_scenario("incident"))
    assert rubric is not None and rubric.threshold == 1.0
    assert [(c.name, c.weight) for c in rubric.criteria] == [("impact", 3.0), ("root_cause", 2.0), ("rules", 1.0)]
    assert [level.name for level in rubric.criteria[0].levels] == ["all", "two", "one", "none"]


async def test_a_judge_grading_incident_s_items_faithfully_scores_and_passes_as_the_program_grade() -> None:
    judge = Judge(ScriptedSpec(judges.incident_faithful), scenario_rubric(get_scenario("incident")))
    compared = 0
    for task in by_difficulty(2):
        incident = incident_of(task)
        right = summary_of(incident)
        for text in [right, *(wrong(right) for wrong in wrong_facts(incident, task.reference["log"]).values())]:
            judged, program = await judge.grade(task, text), graded(task, text)
            assert judged.passed == program.passed, (task.task_id, text)
            assert judged.score == pytest.approx(program.score, abs=1e-3)
            compared += 1
    assert compared == 6 * 6


def _incident_answers(path: Path, labelled: bool) -> Path:
    """Ten incident tasks by id, each answered right and with its start wrong; labels left to the scenario."""
    lines = []
    for task in TASKS[:10]:
        incident = incident_of(task)
        right = summary_of(incident)
        off = wrong_facts(incident, task.reference["log"])["start"](right)
        answers = [{"text": right}, {"text": off}]
        if labelled:
            answers = [answers[0] | {"label": True}, answers[1] | {"label": False}]
        lines.append({"task_id": task.task_id, "answers": answers})
    path.write_text("\n".join(json.dumps(line) for line in lines))
    return path


def test_calibrate_takes_incident_s_own_rubric_and_its_program_s_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = _incident_answers(tmp_path / "answers.jsonl", labelled=False)
    args = ["judge", "calibrate", "--scenario", "incident", "--tasks", str(answers), "--out", str(tmp_path / "card")]
    with pytest.raises(SystemExit) as exited:  # twenty answers are too few for any interval to pass
        main([*args, "--judge", "scripted:tests.support.judges:incident_faithful"])
    assert exited.value.code == 5
    card = json.loads((tmp_path / "card" / "judge-card.json").read_text())
    assert (card["rubric"], card["answers"], card["labelled"], card["invalid"]) == ("incident", 20, 20, 0)
    assert card["figures"]["agreement"]["value"] == 1.0 and card["figures"]["kappa"]["value"] == 1.0
    assert "agreement           1.000" in capsys.readouterr().out


def test_calibrate_takes_its_scenario_as_run_does_by_name_or_by_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = _incident_answers(tmp_path / "answers.jsonl", labelled=False)
    judge = [
        "--judge",
        "scripted:tests.support.judges:incident_faithful",
        "--tasks",
        str(answers),
        "--reword-count",
        "0",
    ]
    cards = []
    for given in (["incident"], ["--scenario", "incident"]):
        with pytest.raises(SystemExit) as exited:
            main(["judge", "calibrate", *given, *judge, "--out", str(tmp_path / given[-1])])
        assert exited.value.code == 5  # measured (too few answers to pass), not refused
        cards.append(json.loads((tmp_path / given[-1] / "judge-card.json").read_text()))
    assert cards[0] == cards[1] and cards[0]["rubric"] == "incident"
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["judge", "calibrate", "arithmetic", "--scenario", "incident", *judge])
    err = capsys.readouterr().err
    assert (
        exited.value.code == 2
        and err == "redraft: error: two scenarios: arithmetic and --scenario incident; give one\n"
    )


def test_calibrate_without_a_rubric_anywhere_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = _incident_answers(tmp_path / "answers.jsonl", labelled=True)
    base = ["judge", "calibrate", "--tasks", str(answers), "--judge", "scripted:tests.support.judges:faithful"]
    for extra, said in (
        (["--scenario", "arithmetic"], "scenario 'arithmetic' has no rubric of its own"),
        ([], "no --scenario to take one from"),
    ):
        with pytest.raises(SystemExit) as exited:
            main([*base, *extra, "--out", str(tmp_path / "card")])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert err == f"redraft: error: give the rubric to judge by with --rubric FILE: {said}\n"
    assert not (tmp_path / "card").exists()


def test_answers_no_program_can_label_and_no_one_did_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = next(iter(get_scenario("cited_answer").tasks(seed=0)))
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"task_id": task.task_id, "answers": [{"text": "It opened in 1884 [S2]."}]}))
    args = ["judge", "calibrate", "--scenario", "cited_answer", "--tasks", str(answers), "--out", str(tmp_path / "c")]
    with pytest.raises(SystemExit) as exited:
        main([*args, "--judge", "scripted:tests.support.judges:cited_by_support"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        f"redraft: error: {answers}: no answer has a label, and scenario 'cited_answer' has no program grade for "
        "them: give each a `label`\n"
    )
    assert not (tmp_path / "c").exists()


def test_calibrate_on_cited_answer_takes_its_rubric_and_the_user_s_labels(tmp_path: Path) -> None:
    tasks = list(get_scenario("cited_answer").tasks(seed=0))[:6]
    answers = tmp_path / "answers.jsonl"
    lines = [
        {"task_id": t.task_id, "answers": [{"text": "It is so [S1].", "label": True}, {"text": "No.", "label": False}]}
        for t in tasks
    ]
    answers.write_text("\n".join(json.dumps(line) for line in lines))
    args = ["judge", "calibrate", "--scenario", "cited_answer", "--tasks", str(answers), "--out", str(tmp_path / "c")]
    with pytest.raises(SystemExit) as exited:  # twelve answers are too few for any interval to pass
        main([*args, "--judge", "scripted:tests.support.judges:cited_by_support"])
    assert exited.value.code == 5
    card = json.loads((tmp_path / "c" / "judge-card.json").read_text())
    assert (card["rubric"], card["answers"], card["labelled"], card["pairs"]) == ("cited_answer", 12, 12, 6)
    assert card["figures"]["agreement"]["value"] == 1.0 and card["figures"]["position_flip_rate"]["value"] == 0.0
