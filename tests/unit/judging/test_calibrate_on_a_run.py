"""``redraft judge calibrate --run DIR``: a judge measured on a finished run's own answers, labelled by the run's
program grades or by the user's labels per task; a run with neither, and labels that are not, said in one line."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from redraft.backends import ScriptedSpec
from redraft.cli import main
from redraft.errors import UserError
from redraft.judging import Judge, calibrate, read_run_answers, rubric_of
from redraft.protocols.messages import Grade, encode
from redraft.rundir import KnownFrame, RunReader, RunStore
from tests.support import judges
from tests.support.report_runs import make_run, records


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scripted-model run of arithmetic graded by its program: some tasks pass at once, some are fixed later,
    one never passes, one failed in its backend and one was lost with its arbiter."""
    return make_run(tmp_path_factory.mktemp("runs") / "arith", copies=8)


def program_labels(root: Path) -> list[bool]:
    """The run's own grades of the answers a card is measured on: each finished task's final answer, and round
    0's leader where the task changed its answer."""
    labels = []
    for record in records(root):
        if record["graded_pass"] is None:
            continue
        labels.append(bool(record["graded_pass"]))
        if (record["best_round"], record["best_sample"]) != (0, record["initial_sample"]):
            labels.append(bool(record["initial_graded_pass"]))
    return labels


def test_a_judge_is_measured_against_the_run_s_own_program_grades(run_dir: Path) -> None:
    answers, scenario = read_run_answers(run_dir)
    assert scenario == "arithmetic"
    labels = program_labels(run_dir)
    assert sorted(a.label for a in answers) == sorted(labels) and True in labels and False in labels
    rubric = rubric_of(judges.RUBRIC)
    faithful = calibrate(Judge(ScriptedSpec(judges.arithmetic_faithful), rubric), answers)
    assert faithful.figures["agreement"].value == 1.0 and faithful.figures["agreement"].n == len(labels)
    assert faithful.figures["kappa"].value == 1.0
    lenient = calibrate(Judge(ScriptedSpec(judges.lenient), rubric), answers)  # passes all: right on passes only
    assert lenient.figures["agreement"].value == pytest.approx(labels.count(True) / len(labels))
    assert not lenient.passed and lenient.figures["kappa"].value == 0.0


def test_the_user_s_labels_come_first_and_a_label_for_no_task_is_refused(run_dir: Path, tmp_path: Path) -> None:
    never = [r["task_id"] for r in records(run_dir) if str(r["task_id"]).startswith("suite/never")]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps({"task_id": t, "label": True}) for t in never))
    answers, _ = read_run_answers(run_dir, labels)
    finals = {a.task.task_id: a.label for a in answers if a.task.task_id in never}
    assert finals and all(finals.values())  # the user's verdict over the program's (which failed them)
    labels.write_text(json.dumps({"task_id": "suite/nowhere", "label": False}))
    with pytest.raises(UserError, match=r"labels.jsonl: no task 'suite/nowhere' in the run"):
        read_run_answers(run_dir, labels)
    labels.write_text('{"task_id": "suite/late", "label": "yes"}')
    with pytest.raises(UserError, match=r"labels.jsonl:1: not a label line"):
        read_run_answers(run_dir, labels)


def test_a_run_without_program_grades_or_labels_is_refused_in_one_line(run_dir: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("manifest.json", "trace.msgpack"):
        (bare / name).write_bytes((run_dir / name).read_bytes())
    ungraded = []
    for record in records(run_dir):
        record.update(graded_pass=None, initial_graded_pass=None, grade=None, initial_grade=None)
        ungraded.append(json.dumps(record))
    (bare / "results.jsonl").write_text("\n".join(ungraded) + "\n")
    with pytest.raises(
        UserError, match=r"no answer has a label .*give --labels FILE, or label its answers in its labels.jsonl$"
    ):
        read_run_answers(bare)
    with pytest.raises(UserError, match="is not a run directory"):
        read_run_answers(tmp_path / "nowhere")


def test_the_command_writes_the_card_of_a_run_and_refuses_a_mix_in_one_line(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps(judges.RUBRIC))
    judge = "scripted:tests.support.judges:arithmetic_faithful"
    args = ["judge", "calibrate", "--run", str(run_dir), "--judge", judge, "--out", str(tmp_path / "card")]
    with pytest.raises(SystemExit) as exited:
        main([*args, "--rubric", str(rubric)])
    card = json.loads((tmp_path / "card" / "judge-card.json").read_text())
    failed = [name for name, figure in card["figures"].items() if not figure["passed"]]
    assert exited.value.code == 5 and failed == ["position_flip_rate"]  # 16 pairs: too few for its interval
    assert card["figures"]["agreement"]["value"] == 1.0
    assert card["figures"]["agreement"]["n"] == len(program_labels(run_dir))
    capsys.readouterr()
    for wrong, said in (
        ([*args], "scenario 'arithmetic' has no rubric of its own"),
        ([*args, "--rubric", str(rubric), "--tasks", str(rubric)], "--tasks FILE or --run DIR (one of them)"),
        ([*args, "--rubric", str(rubric), "--scenario", "arithmetic"], "leave out --scenario"),
    ):
        with pytest.raises(SystemExit) as exited:
            main(wrong)
        err = capsys.readouterr().err
        assert exited.value.code == 2 and said in err and err.count("\n") == 1, err


def test_a_judged_run_s_grades_are_never_labels(run_dir: Path, tmp_path: Path) -> None:
    """The same run, its grades a judge's: nothing labels its answers but the user."""
    judged = tmp_path / "judged"
    reader = RunReader(run_dir)
    store = RunStore.open(judged, reader.manifest())
    for entry, frames in reader.tasks():
        messages = [f.message for f in frames if isinstance(f, KnownFrame)]
        by_judge = [msgspec.structs.replace(m, judge="gpt-4o") if isinstance(m, Grade) else m for m in messages]
        store.append([encode(m) for m in by_judge], entry.result)
    store.finish(wall_s=1.0)
    with pytest.raises(UserError, match=r"the run's grades are a judge's, not a program's\): give --labels FILE"):
        read_run_answers(judged)
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"task_id": "suite/late#0", "label": True}))
    answers, _ = read_run_answers(judged, labels)
    assert [a.label for a in answers if a.label is not None] == [True]  # the user's, on its final answer only
