"""The answers a judge's card is measured on, taken from a finished run directory (``judge calibrate --run DIR``).

Each finished task gives the two answers a run grades: its final answer and, when it differs, round 0's leader,
as the run's trace holds them (read through `redraft.rundir.RunReader`, never by hand). An answer's label is
the user's for its task where given (``--labels FILE``: JSON lines ``{"task_id": "...", "label": true}``, the
final answer's verdict), else the run's own program grade of it (its scenario's grade). A judge's grades are
never labels: they are what a card is measured to vouch for. A run none of whose answers ends up labelled is
refused in one line, as is a labels file that is not one or names a task the run does not have.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from redraft.engine.grader import candidates_of
from redraft.errors import UserError
from redraft.judging.calibration import LabelledAnswer
from redraft.protocols.messages import Grade, Message, Result, Task
from redraft.rundir import KnownFrame, RunReader


class _Label(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    task_id: str
    label: bool


def read_run_answers(run: Path, labels: Path | None = None) -> tuple[list[LabelledAnswer], str]:
    """The labelled answers of the finished run at ``run`` and its scenario's name (see the module docstring)."""
    reader = RunReader(run)
    given = read_labels(labels) if labels is not None else {}
    answers: list[LabelledAnswer] = []
    seen: set[str] = set()
    scenario = ""
    judged = False
    for entry, frames in reader.tasks():
        messages = [f.message for f in frames if isinstance(f, KnownFrame)]
        task = next((m for m in messages if isinstance(m, Task)), None)
        seen.add(entry.result.task_id)
        if task is None or entry.result.best_round is None:
            continue  # its frames are lost, or it ended without an answer
        scenario = scenario or task.scenario
        by_judge = any(isinstance(m, Grade) and m.judge for m in messages)
        judged = judged or by_judge
        answers += _answers(task, entry.result, messages, given.get(task.task_id), program=not by_judge)
    if unknown := sorted(set(given) - seen):
        raise UserError(f"{labels}: no task {unknown[0]!r} in the run {run} ({len(unknown)} such label(s))")
    if not answers:
        raise UserError(f"{run}: no finished task with an answer to judge")
    if all(a.label is None for a in answers):
        whose = "a judge's, not a program's" if judged else "none: its scenario has no program grade for them"
        raise UserError(f"{run}: no answer has a label (the run's grades are {whose}): give --labels FILE")
    return answers, scenario


def _answers(
    task: Task, result: Result, messages: list[Message], label: bool | None, *, program: bool
) -> list[LabelledAnswer]:
    """The task's final answer and round 0's leader (when another text), each with its label."""
    texts: dict[tuple[int | None, int | None], str] = {(c.round, c.sample): c.text for c in candidates_of(messages)}
    final = texts.get((result.best_round, result.best_sample), result.answer)
    if final is None:
        return []
    ours = label if label is not None else (result.graded_pass if program else None)
    made = [LabelledAnswer(task=task, text=final, label=ours)]
    initial = texts.get((0, result.initial_sample))
    if initial is not None and initial != final:
        made.append(LabelledAnswer(task=task, text=initial, label=result.initial_graded_pass if program else None))
    return made


def read_labels(path: Path) -> dict[str, bool]:
    """The user's label per task id from a JSON-lines file; a `UserError` of one line naming the file and line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UserError(f"cannot read labels {path}: {exc.strerror or exc}") from None
    labels: dict[str, bool] = {}
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            line = msgspec.convert(json.loads(raw), _Label)
        except (ValueError, msgspec.ValidationError) as exc:
            raise UserError(f"{path}:{number}: not a label line (a `task_id` and its `label`): {exc}") from None
        labels[line.task_id] = line.label
    return labels
