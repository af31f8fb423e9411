"""A tune's train evidence from people's labels (``--train-labels RUN``): which tasks are train, and what the
proposer is told a person said of each.

The labels are the run's current ones (`redraft.rundir.current_labels`: per task, the latest on the answer the
run holds now). Their tasks are the train split (`redraft.tuning._splits.labelled_splits`), and each train task's
example carries the person's verdict, score and comment with the answer they judged (`Judged`). A label judges
that answer only: an evaluation's new answers on train are scored as every evaluation's are (the grade, or the
feedback), and validation and test never read a label. A label of a task the tune does not have is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from redraft.engine.prompts import cut
from redraft.errors import UserError
from redraft.protocols.messages import Task
from redraft.protocols.tuning import Judged
from redraft.rundir import current_labels, final_answers
from redraft.tuning._examples import ANSWER_CHARS, DETAIL_CHARS


def labelled_train(run: Path, tasks: Mapping[str, Task]) -> dict[str, Judged]:
    """Each labelled task of the run at ``run`` (by id) with what a person said of its answer; `UserError` for a run
    with no current label, or a label of a task not in ``tasks``."""
    labels = current_labels(run)
    if not labels:
        raise UserError(
            f"--train-labels {run}: no task there has a person's label on the answer the run holds now; label some"
        )
    unknown = sorted(set(labels) - set(tasks))
    if unknown:
        raise UserError(
            f"--train-labels {run}: task {unknown[0]!r} is labelled there but is not one of the tune's tasks "
            f"({len(unknown)} such); tune on the labelled run's tasks"
        )
    answers = final_answers(run)
    return {
        task_id: Judged(
            verdict=label.verdict,
            score=label.score,
            comment=cut(label.comment, 2 * DETAIL_CHARS),
            answer=cut(answers[task_id], ANSWER_CHARS),
        )
        for task_id, label in sorted(labels.items())
    }
