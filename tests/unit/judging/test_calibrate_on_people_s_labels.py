"""``redraft judge calibrate --run DIR`` takes people's labels from the run's ``labels.jsonl`` first (the latest
label per task on the answer the run holds now), then the run's program grades for the rest; the card counts and
says both, and says when it has too few human labels to vouch for the judge on people's judgement."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest

from redraft.backends import ScriptedSpec
from redraft.cli import main
from redraft.errors import RedraftWarning
from redraft.judging import HUMAN_LABELS_TRUSTED, Judge, calibrate, read_answers, read_run_answers, rubric_of
from redraft.judging.calibration import JudgeCard
from redraft.rundir import Label, answer_digest, append_label
from redraft.scenarios import get_scenario
from tests.support import judges
from tests.support.report_runs import make_run


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("runs") / "arith", copies=8)


@pytest.fixture
def run_dir(made: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(made, tmp_path / "run"))


def finals(run: Path) -> dict[str, tuple[str, bool | None]]:
    """Each finished task's final answer and its program grade (the first answer a task gives a card)."""
    found: dict[str, tuple[str, bool | None]] = {}
    for answer in read_run_answers(run)[0]:
        found.setdefault(answer.task.task_id, (answer.text, answer.label))
    return found


def label(run: Path, task_id: str, text: str, verdict: str) -> None:
    append_label(run, Label(task_id, "ana", verdict, answer_digest(text)))  # type: ignore[arg-type]


def test_people_s_current_labels_come_before_the_program_s_grades(run_dir: Path) -> None:
    final = finals(run_dir)
    never = sorted(t for t in final if t.startswith("suite/never"))
    for task_id in never:  # the program failed them; a person passes them
        label(run_dir, task_id, final[task_id][0], "pass")
    label(run_dir, "suite/late#0", final["suite/late#0"][0], "fail")
    label(run_dir, "suite/late#0", final["suite/late#0"][0], "pass")  # the latest wins
    label(run_dir, "suite/late#1", "an answer the run no longer holds", "fail")  # not current: the program grades it
    answers, _ = read_run_answers(run_dir)
    by_final = {a.task.task_id: a for a in answers if a.text == final[a.task.task_id][0]}
    assert all(by_final[t].label is True and by_final[t].source == "human" for t in never)
    assert (by_final["suite/late#0"].label, by_final["suite/late#0"].source) == (True, "human")
    assert (by_final["suite/late#1"].label, by_final["suite/late#1"].source) == (final["suite/late#1"][1], "program")
    humans = [a for a in answers if a.source == "human"]
    assert len(humans) == len(never) + 1
    assert all(a.source == "program" for a in answers if a not in humans and a.label is not None)


def test_the_user_s_file_comes_before_the_run_s_labels(run_dir: Path, tmp_path: Path) -> None:
    final = finals(run_dir)
    label(run_dir, "suite/never#0", final["suite/never#0"][0], "pass")
    given = tmp_path / "mine.jsonl"
    given.write_text(json.dumps({"task_id": "suite/never#0", "label": False}) + "\n")
    answers, _ = read_run_answers(run_dir, given)
    [mine] = [a for a in answers if a.task.task_id == "suite/never#0" and a.text == final["suite/never#0"][0]]
    assert (mine.label, mine.source) == (False, "human")


def test_the_card_counts_and_says_its_human_labels_and_program_grades(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    final = finals(run_dir)
    never = [t for t in final if t.startswith("suite/never")]
    for task_id in never:
        label(run_dir, task_id, final[task_id][0], "pass")
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps(judges.RUBRIC))
    judge = "scripted:tests.support.judges:arithmetic_faithful"  # fails a wrong sum, as the program does
    args = ["judge", "calibrate", "--run", str(run_dir), "--judge", judge, "--rubric", str(rubric)]
    with pytest.raises(SystemExit):
        main([*args, "--out", str(tmp_path / "card")])
    card = json.loads((tmp_path / "card" / "judge-card.json").read_text())
    programs = card["labelled"] - len(never)
    assert (card["human_labels"], card["program_labels"]) == (len(never), programs)
    # The people passed answers the faithful judge fails: it disagrees with them on each, and only on them.
    agreement = card["figures"]["agreement"]
    assert agreement["n"] == card["labelled"] and agreement["value"] == pytest.approx(programs / card["labelled"])
    out = capsys.readouterr().out
    assert f"labels: {len(never)} human labels, {programs} program grades" in out
    assert f"a judge's card needs 50 human labels to be trusted on people's judgement; this one has {len(never)}" in out
    page = (tmp_path / "card" / "judge-card.html").read_text()
    assert f"labels: {len(never)} human labels, {programs} program grades" in page  # the card's page says it too
    assert "needs 50 human labels" in page


def test_a_card_with_enough_human_labels_says_only_how_many(made: Path) -> None:
    answers, _ = read_run_answers(made)
    card = calibrate(Judge(ScriptedSpec(judges.arithmetic_faithful), rubric_of(judges.RUBRIC)), answers[:4])
    assert card.program_labels == 4 and card.human_labels == 0
    enough = msgspec.structs.replace(card, human_labels=HUMAN_LABELS_TRUSTED, program_labels=0, labelled=50)
    assert enough.labels_said() == ["labels: 50 human labels, 0 program grades"]
    older = msgspec.json.decode(
        msgspec.json.encode({k: v for k, v in msgspec.structs.asdict(card).items() if not k.endswith("_labels")}),
        type=JudgeCard,
    )
    assert older.human_labels is None and older.labels_said() == []  # a card written before it counted them


def test_a_tasks_file_s_labels_are_people_s_and_a_scenario_s_grades_the_program_s(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    line = {"task_id": "t1", "prompt": "What is 1 plus 1?", "gold": {"answer": 2}}
    path.write_text(json.dumps(line | {"answers": [{"text": "Answer: 2", "label": False}, {"text": "Answer: 2"}]}))
    first, second = read_answers(path, get_scenario("arithmetic"))
    assert (first.label, first.source) == (False, "human") and (second.label, second.source) == (True, "program")


def test_a_damaged_line_of_the_labels_is_said_and_the_rest_are_taken(run_dir: Path) -> None:
    final = finals(run_dir)
    label(run_dir, "suite/never#0", final["suite/never#0"][0], "pass")
    with open(run_dir / "labels.jsonl", "ab") as out:
        out.write(b"not a judgement\n")
    label(run_dir, "suite/never#1", final["suite/never#1"][0], "pass")
    with pytest.warns(RedraftWarning, match=r"labels.jsonl: 1 line\(s\) that are no judgement skipped"):
        answers, _ = read_run_answers(run_dir)
    assert sum(a.source == "human" for a in answers) == 2
