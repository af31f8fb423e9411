"""``redraft tune --train-labels RUN``: the tasks people labelled in a run are the train split, the others are
validation and test (read once, never labels), and the proposer is told what a person said of each train task's
answer. Through `redraft.cli.main` in this process (evaluations scored by a rule, the proposer a function)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from redraft.engine.proposer import proposer_messages
from redraft.errors import UserError
from redraft.protocols.messages import Draft, Result, Task, Usage, encode
from redraft.protocols.tuning import Example, Judged, ProposeRequest
from redraft.rundir import Label, RunStore, answer_digest, append_label
from redraft.tuning._labelled import labelled_train
from redraft.tuning._splits import check_disjoint, labelled_splits
from tests.support.resolved import manifest_for
from tests.unit.test_cli import in_process
from tests.unit.tuning.test_tune_terminal import tune_args, world  # noqa: F401 - the fixture

TASKS = [Task(task_id=f"sum-{i:03d}", scenario="x", prompt=f"Add {11 + 7 * i} and {5 + 3 * i}.") for i in range(30)]
LABELLED = ["sum-002", "sum-005", "sum-011", "sum-017", "sum-023"]


def test_the_labelled_tasks_are_train_and_the_others_validation_and_test_by_seed() -> None:
    twin = Task(task_id="twin", scenario="x", prompt=TASKS[5].prompt)  # asks what a labelled task asks
    tasks = [*TASKS, twin]
    splits = labelled_splits(tasks, LABELLED, (0.4, 0.3, 0.3), seed=3)
    assert splits.train == LABELLED
    rest = set(splits.validation) | set(splits.test)
    assert rest == {t.task_id for t in TASKS} - set(LABELLED) and not set(splits.validation) & set(splits.test)
    assert (len(splits.validation), len(splits.test)) == (12, 13)  # 0.3 : 0.3 of the 25 others
    check_disjoint(splits, tasks)
    again = labelled_splits(tasks[::-1], LABELLED[::-1], (0.4, 0.3, 0.3), seed=3)  # in any order, the same
    assert set(again.validation) == set(splits.validation) and set(again.test) == set(splits.test)
    other = labelled_splits(tasks, LABELLED, (0.4, 0.3, 0.3), seed=4)
    assert set(other.test) != set(splits.test)
    with pytest.raises(UserError, match="leave the train split empty"):
        labelled_splits(TASKS, [], (0.4, 0.3, 0.3))


def labelled_run(root: Path, answers: dict[str, str]) -> Path:
    """A finished run of the tune's tasks, each answered as ``answers`` says."""
    store = RunStore.open(root, manifest_for_run(root))
    for task in TASKS:
        text = answers.get(task.task_id, "SUM=0")
        result = Result(
            task_id=task.task_id,
            scenario="x",
            answer=text,
            text=text,
            score=0.0,
            passed=False,
            initial_score=0.0,
            initial_passed=False,
            rounds=1,
            stop_reason="threshold",
            usage=Usage(),
            wall_s=0.0,
            best_round=0,
            best_sample=0,
        )
        draft = Draft(task_id=task.task_id, round=0, sample=0, text=text)
        store.append([encode(task), encode(draft), encode(result)], result)
    store.finish(0.0)
    return root


def manifest_for_run(root: Path) -> dict[str, Any]:
    from redraft import RunConfig

    return manifest_for(RunConfig.build(scenario="arithmetic", out=str(root)), root.name)


def label_each(run: Path, verdicts: dict[str, str], comment: str = "") -> None:
    for task_id, verdict in verdicts.items():
        append_label(run, Label(task_id, "ana", verdict, answer_digest("SUM=0"), comment=comment))  # type: ignore[arg-type]


def test_what_a_person_said_is_read_from_the_run_s_current_labels(tmp_path: Path) -> None:
    run = labelled_run(tmp_path / "run", {})
    by_id = {t.task_id: t for t in TASKS}
    with pytest.raises(UserError, match="no task there has a person's label"):
        labelled_train(run, by_id)
    label_each(run, {"sum-002": "fail", "sum-005": "pass"}, comment="no working shown")
    append_label(run, Label("sum-011", "ana", "pass", answer_digest("an older answer")))  # not current
    judged = labelled_train(run, by_id)
    assert judged == {
        "sum-002": Judged(verdict="fail", comment="no working shown", answer="SUM=0"),
        "sum-005": Judged(verdict="pass", comment="no working shown", answer="SUM=0"),
    }
    with pytest.raises(UserError, match="task 'sum-005' is labelled there but is not one of the tune's tasks"):
        labelled_train(run, {k: v for k, v in by_id.items() if k != "sum-005"})


def test_the_proposer_is_shown_what_the_person_said_beside_the_answer() -> None:
    judged = Judged(verdict="fail", score=0.25, comment="the sum is right but the form is not", answer="It is 22.")
    example = Example(task_id="sum-001", prompt="Add 18 and 8.", answer="26", feedback=0.0, judged=judged)
    request = ProposeRequest(
        section="draft_system",
        text="Answer.",
        placeholders=[],
        limit=500,
        history=[],
        examples=[example],
        feedback=0.0,
        seed=0,
    )
    user = proposer_messages(request)[1].content
    assert (
        "A person judged an earlier answer to this task FAIL, score 0.25: the sum is right but the form is not" in user
    )
    assert "That answer:\nIt is 22." in user


def test_the_tune_trains_on_the_labelled_tasks_and_tells_the_proposer_their_labels(
    world: dict[str, Any],  # noqa: F811 - the fixture
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = labelled_run(tmp_path / "labelled", {})
    label_each(run, dict.fromkeys(LABELLED, "fail"), comment="write SUM=<number>")
    out = tmp_path / "t"
    assert in_process(*tune_args(world, out, "--train-labels", str(run), proposals=2)) == 0
    splits = json.loads((out / "splits.json").read_text())
    assert splits["train"] == LABELLED and not set(LABELLED) & (set(splits["validation"]) | set(splits["test"]))
    requests = world["proposer"].requests
    assert requests and all(e.task_id in LABELLED for r in requests for e in r.examples)
    assert all(e.judged is not None and e.judged.comment == "write SUM=<number>" for r in requests for e in r.examples)
    manifest = json.loads((out / "tune-manifest.json").read_text())
    assert manifest["train_labels"] == str(run)
    assert json.loads((out / "tune.json").read_text())["train_labels"] == str(run)
    append_label(run, Label("sum-029", "ana", "pass", answer_digest("SUM=0")))  # the train tasks change: refused
    capsys.readouterr()
    assert in_process(*tune_args(world, out, "--train-labels", str(run), proposals=2)) == 2
    assert "the labelled tasks (--train-labels) changed since this tune began" in capsys.readouterr().err
