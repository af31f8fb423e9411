"""The answers a judge's card is measured on, taken from a finished run directory (``judge calibrate --run DIR``).

Each finished task gives the two answers a run grades: its final answer and, when it differs, round 0's leader,
as the run's trace holds them (read through `redraft.rundir.RunReader`, never by hand). A final answer's label is
a person's where one is given, else the run's own program grade of it (its scenario's grade); round 0's leader
takes the program grade. People's labels come from the user's file first (``--labels FILE``: JSON lines
``{"task_id": "...", "label": true}``, the final answer's verdict), then from the run's own ``labels.jsonl``
(`redraft.rundir.read_judgements`: the latest label per task on the answer the run holds now, so a label on an
answer a resume has since replaced does not count). Each answer says who labelled it (``source``), and the card
counts both. A judge's grades are never labels: they are what a card is measured to vouch for. A run none of whose
answers ends up labelled is refused in one line, as is a labels file that is not one or names a task the run does
not have.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import msgspec

from redraft.engine.grader import candidates_of
from redraft.errors import RedraftWarning, UserError
from redraft.judging.calibration import LabelledAnswer
from redraft.protocols.messages import Grade, Message, Result, Task
from redraft.rundir import LABELS, KnownFrame, Label, RunReader, read_judgements


class _Label(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    task_id: str
    label: bool


@dataclass(frozen=True)
class _Finished:
    """A finished task with an answer: its final answer and round 0's leader, as the trace holds them."""

    task: Task
    result: Result
    final: str
    initial: str | None
    program: bool
    """Its grades are its scenario's program's (not a judge's): they may label its answers."""


def read_run_answers(run: Path, labels: Path | None = None) -> tuple[list[LabelledAnswer], str]:
    """The labelled answers of the finished run at ``run`` and its scenario's name (see the module docstring)."""
    reader = RunReader(run)
    given = read_labels(labels) if labels is not None else {}
    finished: list[_Finished] = []
    seen: set[str] = set()
    judged = False
    for entry, frames in reader.tasks():
        messages = [f.message for f in frames if isinstance(f, KnownFrame)]
        seen.add(entry.result.task_id)
        judged = judged or any(isinstance(m, Grade) and m.judge for m in messages)
        finished += _finished(entry.result, messages)
    if unknown := sorted(set(given) - seen):
        raise UserError(f"{labels}: no task {unknown[0]!r} in the run {run} ({len(unknown)} such label(s))")
    current = _people_s(run, {f.task.task_id: f.final for f in finished})
    people = {task_id: label.verdict == "pass" for task_id, label in current.items()} | given
    answers = [answer for f in finished for answer in _answers(f, people.get(f.task.task_id))]
    if not answers:
        raise UserError(f"{run}: no finished task with an answer to judge")
    if all(a.label is None for a in answers):
        whose = "a judge's, not a program's" if judged else "none: its scenario has no program grade for them"
        raise UserError(
            f"{run}: no answer has a label (the run's grades are {whose}): give --labels FILE, "
            "or label its answers in its labels.jsonl"
        )
    return answers, finished[0].task.scenario


def _people_s(run: Path, finals: dict[str, str]) -> dict[str, Label]:
    """The run's people's labels on the answers it holds now; a damaged line of their file said (a warning)."""
    judgements = read_judgements(run)
    if judgements.set_aside:
        warnings.warn(
            f"{run / LABELS}: {judgements.set_aside} line(s) that are no judgement skipped (torn or damaged)",
            RedraftWarning,
            stacklevel=1,
        )
    return judgements.current(finals)


def _finished(result: Result, messages: list[Message]) -> list[_Finished]:
    """The task as `_Finished`, or nothing when its frames are lost or it ended without an answer."""
    task = next((m for m in messages if isinstance(m, Task)), None)
    if task is None or result.best_round is None:
        return []
    texts: dict[tuple[int | None, int | None], str] = {(c.round, c.sample): c.text for c in candidates_of(messages)}
    final = texts.get((result.best_round, result.best_sample), result.answer)
    if final is None:
        return []
    by_judge = any(isinstance(m, Grade) and m.judge for m in messages)
    return [_Finished(task, result, final, texts.get((0, result.initial_sample)), program=not by_judge)]


def _answers(finished: _Finished, person: bool | None) -> list[LabelledAnswer]:
    """The task's final answer and round 0's leader (when another text), each with its label and who gave it."""
    task, result, program = finished.task, finished.result, finished.program
    made = [_labelled(task, finished.final, person, result.graded_pass if program else None)]
    if finished.initial is not None and finished.initial != finished.final:
        made.append(_labelled(task, finished.initial, None, result.initial_graded_pass if program else None))
    return made


def _labelled(task: Task, text: str, person: bool | None, grade: bool | None) -> LabelledAnswer:
    if person is not None:
        return LabelledAnswer(task=task, text=text, label=person, source="human")
    if grade is not None:
        return LabelledAnswer(task=task, text=text, label=grade, source="program")
    return LabelledAnswer(task=task, text=text)


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
