"""A judge's card below the sample size its intervals need says "too few answers", not FAIL; a figure already
beyond saving still fails; and a kappa with nothing beyond chance to measure is undefined (null), never 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from redraft.backends import ScriptedSpec
from redraft.cli import main
from redraft.judging import Judge, LabelledAnswer, Thresholds, calibrate, write_card
from redraft.judging._figures import KAPPA_NEEDS, cohen_kappa, kappa, share, share_needs
from redraft.protocols.messages import Task
from redraft.stats import wilson
from tests.support import judges
from tests.unit.judging.test_calibration import RUBRIC, labelled_set


def test_the_size_a_share_needs_is_the_fewest_events_wilson_lets_pass() -> None:
    defaults = Thresholds()
    assert share_needs(defaults.agreement, "at_least") == 16  # 3.84 * 0.8 / 0.2 = 15.4
    assert share_needs(defaults.repeatability, "at_least") == 35
    assert share_needs(defaults.position_flip_rate, "at_most") == 35
    for threshold, side in ((0.8, "at_least"), (0.9, "at_least"), (0.1, "at_most"), (0.3, "at_most")):
        needs = share_needs(threshold, side)  # type: ignore[arg-type]
        assert needs is not None
        best = [side == "at_least"] * needs
        assert share(best, threshold, side).passed  # type: ignore[arg-type]
        assert not share(best[1:], threshold, side).passed  # type: ignore[arg-type]
    assert share_needs(1.0, "at_least") is None  # no number of answers reaches a low end of 1
    assert wilson(35, 35)[0] >= 0.9 > wilson(34, 34)[0]


def test_kappa_needs_seven_balanced_answers_by_its_bootstrap() -> None:
    assert KAPPA_NEEDS == 7
    perfect = [True, False] * 4  # 8 labelled answers, all agreed on
    assert kappa(perfect, perfect, 0.6).passed
    assert kappa(perfect[:4], perfect[:4], 0.6).verdict == "too_few"


def test_a_card_on_five_answers_says_too_few_not_fail() -> None:
    card = calibrate(Judge(ScriptedSpec(judges.faithful), RUBRIC), labelled_set(3)[:5])
    assert card.answers == 5 and not card.passed
    assert {name: f.verdict for name, f in card.figures.items()} == dict.fromkeys(card.figures, "too_few")
    assert card.verdict == "too_few"
    # Repeatability measures one event per answer and needs 35; the 2 pairs need 35 too, 2.5 answers a pair.
    assert card.answers_needed() == 88
    assert card.said().startswith("too few answers (n = 5, needs about 88)")


def test_a_figure_beyond_saving_fails_however_few_the_answers() -> None:
    card = calibrate(Judge(ScriptedSpec(judges.first), RUBRIC), labelled_set(3)[:5])
    flips = card.figures["position_flip_rate"]
    assert flips.n < (flips.needs or 0) and flips.low is not None and flips.low > flips.threshold
    assert flips.verdict == "fail" and card.verdict == "fail" and card.said() == "failed"


def test_kappa_of_raters_all_alike_is_undefined_not_zero() -> None:
    assert cohen_kappa([(True, True)] * 5) is None  # 0 / 0: chance alone agrees on everything
    figure = kappa([True] * 40, [True] * 40, 0.6)
    assert (figure.value, figure.low, figure.high, figure.n, figure.passed) == (None, None, None, 40, False)
    assert figure.verdict == "fail"  # enough answers; kappa can never pass on labels of one kind


def _all_passing(tmp_path: Path, tasks: int) -> list[str]:
    """A tasks file whose answers are all right and all labelled so: every label alike."""
    rubric, answers = tmp_path / "rubric.json", tmp_path / "answers.jsonl"
    rubric.write_text(json.dumps(judges.RUBRIC))
    lines = [
        {"task_id": f"t{n}", "prompt": f"{n}+{n}?", "answers": [{"text": f"CORRECT {2 * n}", "label": True}]}
        for n in range(tasks)
    ]
    answers.write_text("\n".join(json.dumps(line) for line in lines))
    return ["judge", "calibrate", "--tasks", str(answers), "--rubric", str(rubric), "--out", str(tmp_path / "card")]


def test_the_command_prints_too_few_and_an_undefined_kappa(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*_all_passing(tmp_path, 5), "--judge", "scripted:tests.support.judges:faithful", "--reword-count", "0"])
    assert exited.value.code == 5  # a card that does not pass gates nothing, whatever the reason
    out = capsys.readouterr().out
    assert "FAIL" not in out
    assert "agreement           1.000 [0.566, 1.000]  >= 0.8  n=5  too few (needs about 16)" in out
    assert "kappa               undefined  >= 0.6  n=5  too few (needs about 7)" in out
    assert "card too few answers (n = 5, needs about 35)" in out
    card = json.loads((tmp_path / "card" / "judge-card.json").read_text())
    assert card["figures"]["kappa"]["value"] is None and card["figures"]["kappa"]["n"] == 5
    assert card["figures"]["agreement"]["needs"] == 16


def test_the_card_page_says_too_few_and_undefined(tmp_path: Path) -> None:
    tasks = [Task(task_id=f"t{n}", scenario="open", prompt=f"{n}+{n}?") for n in range(5)]
    answers = [LabelledAnswer(task=task, text=f"CORRECT {2 * n}", label=True) for n, task in enumerate(tasks)]
    card = calibrate(Judge(ScriptedSpec(judges.faithful), RUBRIC), answers)
    _, html_path = write_card(card, tmp_path)
    cells = _cells(html_path.read_text())
    kappa_row = next(row for row in cells if row and row[0] == "kappa")
    assert kappa_row[1] == "undefined" and kappa_row[-1] == "too few (needs about 7)"
    assert all(row[-1] != "fail" for row in cells if row)
    assert "too few answers (n = 5, needs about" in html_path.read_text()


def _cells(page: str) -> list[list[str]]:
    """Each table row's cells, as text."""
    from html.parser import HTMLParser

    rows: list[list[str]] = []

    class Rows(HTMLParser):
        cell: list[str] | None = None

        def handle_starttag(self, tag: str, attrs: object) -> None:
            if tag == "tr":
                rows.append([])
            elif tag == "td":
                self.cell = []

        def handle_endtag(self, tag: str) -> None:
            if tag == "td" and self.cell is not None:
                rows[-1].append("".join(self.cell).strip())
                self.cell = None

        def handle_data(self, data: str) -> None:
            if self.cell is not None:
                self.cell.append(data)

    Rows().feed(page)
    return rows


def test_a_comparison_says_why_a_card_with_too_few_answers_does_not_vouch() -> None:
    from types import SimpleNamespace
    from typing import cast

    from redraft.comparison._judged import card_problem
    from redraft.engine.grader import JudgeSetup

    card = calibrate(Judge(ScriptedSpec(judges.faithful), RUBRIC), labelled_set(3)[:5])
    judge = cast(JudgeSetup, SimpleNamespace(spec=card.judge, rubric=card.rubric, prompts=card.prompts))
    assert card_problem(judge, card) == f"it measured {card.said()}"
    assert not (card_problem(judge, card) or "").startswith("it failed")


def test_a_failed_card_names_its_figures_with_too_few_apart_from_those_that_failed() -> None:
    from types import SimpleNamespace
    from typing import cast

    from redraft.comparison._judged import card_problem
    from redraft.engine.grader import JudgeSetup

    card = calibrate(Judge(ScriptedSpec(judges.first), RUBRIC), labelled_set(3)[:5])
    judge = cast(JudgeSetup, SimpleNamespace(spec=card.judge, rubric=card.rubric, prompts=card.prompts))
    said = card_problem(judge, card) or ""
    assert said.startswith("it failed: position_flip_rate 1.00, its high end 1.00 (needs at most 0.1); too few for ")
    assert "repeatability (n = 5, needs about 35)" in said and "agreement (n = 5, needs about 16)" in said
