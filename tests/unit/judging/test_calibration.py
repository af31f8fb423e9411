"""A judge's card, measured on scripted judges each built to judge in one known way: a faithful judge passes
every figure, and each biased one fails on the figure that measures its bias, by the numbers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from redraft.backends import ChatRequest, ScriptedSpec
from redraft.judging import (
    Judge,
    JudgeCard,
    LabelledAnswer,
    Thresholds,
    calibrate,
    read_answers,
    read_card,
    rubric_of,
    write_card,
)
from redraft.judging._figures import cohen_kappa, kappa, share
from redraft.protocols.messages import Task
from tests.support import judges

RUBRIC = rubric_of(judges.RUBRIC)
TASKS = 40


def labelled_set(tasks: int = TASKS) -> list[LabelledAnswer]:
    """Each task with a right answer and a wrong one, labelled (short answers: well under `judges.LONG`)."""
    answers = []
    for n in range(tasks):
        task = Task(task_id=f"t{n}", scenario="open", prompt=f"What is {n} plus {n}?")
        answers.append(LabelledAnswer(task=task, text=f"CORRECT: {2 * n}", label=True))
        answers.append(LabelledAnswer(task=task, text=f"It is {2 * n + 1}", label=False))
    return answers


def card_of(reply: Callable[[ChatRequest], str], **options: object) -> JudgeCard:
    return calibrate(Judge(ScriptedSpec(reply), RUBRIC), labelled_set(), **options)  # type: ignore[arg-type]


def failing(card: JudgeCard) -> set[str]:
    return {name for name, figure in card.figures.items() if not figure.passed}


def test_a_faithful_judge_passes_every_figure() -> None:
    card = card_of(judges.faithful)
    assert card.passed and failing(card) == set()
    figures = card.figures
    assert (figures["agreement"].value, figures["kappa"].value) == (1.0, 1.0)
    assert (figures["position_flip_rate"].value, figures["length_bias"].value) == (0.0, 0.0)
    assert (figures["rubric_stability"].value, figures["repeatability"].value) == (1.0, 1.0)
    assert (card.answers, card.labelled, card.pairs, card.invalid) == (80, 80, 40, 0)
    assert figures["rubric_stability"].n == 160  # two rewordings of each of 80 verdicts


def test_a_judge_that_prefers_the_first_answer_fails_on_position_alone() -> None:
    card = card_of(judges.first)
    assert failing(card) == {"position_flip_rate"} and not card.passed
    assert card.figures["position_flip_rate"].value == 1.0


def test_a_judge_that_prefers_the_longer_answer_fails_on_length() -> None:
    card = card_of(judges.longer)
    assert card.figures["length_bias"].value == 1.0  # padding raised every answer's score
    assert "length_bias" in failing(card) and not card.passed
    assert card.figures["agreement"].value == 0.5  # every short answer failed, right or wrong


def test_a_random_judge_fails_on_repeatability_and_kappa() -> None:
    card = card_of(judges.noisy)
    assert {"repeatability", "kappa", "agreement"} <= failing(card)
    kappa = card.figures["kappa"]
    assert kappa.low is not None and kappa.low < 0.6 and abs(kappa.value or 0) < 0.3  # chance, not skill
    assert 0.3 < (card.figures["repeatability"].value or 0) < 0.7


def test_few_answers_cannot_pass_even_when_every_one_agrees() -> None:
    card = calibrate(Judge(ScriptedSpec(judges.faithful), RUBRIC), labelled_set(5))
    assert card.figures["agreement"].value == 1.0 and not card.figures["agreement"].passed
    assert not card.passed


def test_thresholds_are_the_user_s_to_set() -> None:
    card = card_of(judges.first, thresholds=Thresholds(position_flip_rate=1.0))
    assert card.passed and card.figures["position_flip_rate"].threshold == 1.0


def test_invalid_replies_are_counted_and_measure_nothing() -> None:
    card = card_of(judges.broken)
    assert card.invalid == 80 * 5 + 40 and not card.passed
    assert all(f.value is None and f.n == 0 for f in card.figures.values())


def test_kappa_is_agreement_beyond_chance() -> None:
    assert cohen_kappa([(True, True), (False, False)] * 5) == 1.0
    assert cohen_kappa([(True, True), (True, False)] * 5) == 0.0  # a judge that always passes: chance only
    assert share([True] * 8, 0.5, "at_least").low == pytest.approx(0.6756, abs=1e-3)  # Wilson, not a point
    failing = kappa([False] * 12, [True] * 4 + [False] * 8, 0.6)  # the embedded judge's, on incident
    assert f"{failing.value:.3f}" == f"{failing.low:.3f}" == "0.000"  # its rounding error is not shown as -0.000


def test_the_card_is_written_as_json_and_a_page(tmp_path: Path) -> None:
    card = card_of(judges.first)
    json_path, html_path = write_card(card, tmp_path / "out")
    data = json.loads(json_path.read_text())
    assert data["passed"] is False
    assert set(data["figures"]) == {
        *("agreement", "kappa", "position_flip_rate", "length_bias", "rubric_stability", "repeatability")
    }
    assert set(data["figures"]["kappa"]) >= {"value", "low", "high", "threshold", "passed"}
    assert read_card(tmp_path / "out") == card
    page = html_path.read_text()
    assert "position_flip_rate" in page and "failed" in page


def test_answers_are_labelled_by_the_file_or_by_the_scenario_s_program_grade(tmp_path: Path) -> None:
    from redraft.scenarios import get_scenario

    arithmetic = get_scenario("arithmetic")
    task = next(iter(arithmetic.tasks(seed=0)))
    gold = arithmetic.grade(task, "no idea")
    assert gold is not None and not gold.passed
    path = tmp_path / "answers.jsonl"
    lines = [
        {"task_id": task.task_id, "answers": [{"text": "no idea"}, {"text": "x", "label": True}]},
        {"task_id": "own", "prompt": "Say hi.", "answer": "hi", "label": True},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines))
    answers = read_answers(path, arithmetic)
    assert [(a.task.task_id, a.label) for a in answers] == [(task.task_id, False), (task.task_id, True), ("own", True)]
    assert answers[0].task.prompt == task.prompt
