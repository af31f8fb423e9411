"""The answers a judge's card is measured on, read from a JSON-lines file, labelled by the user or by a
scenario's program grade.

Each line is one task and its answers::

    {"task_id": "t1", "prompt": "Summarise ...", "answers": [{"text": "...", "label": true}, {"text": "..."}]}

(``"answer"`` and ``"label"`` on the line itself stand for one answer.) With a scenario, a line may leave out
its ``prompt``, and its task is the scenario's own of that id; ``gold`` and ``reference`` may be given for the
grade. An answer without a ``label`` is labelled by the scenario's program grade when there is one (its pass
is the label: a program that can grade the task labels the judge's answer for free), and otherwise enters no
label figure; a file none of whose answers ends up labelled is refused, since its card could not pass. Every
mistake is one line naming the file (and the line, where it is one line's), a `UserError`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from redraft.errors import UserError
from redraft.judging.calibration import LabelledAnswer
from redraft.protocols.messages import Task
from redraft.scenarios import Scenario


class _Answer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str
    label: bool | None = None


class _Line(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    task_id: str
    prompt: str | None = None
    answers: list[_Answer] = []
    answer: str | None = None
    label: bool | None = None
    gold: dict[str, Any] = {}
    reference: dict[str, Any] = {}


def read_answers(path: str | Path, scenario: Scenario | None = None, *, seed: int = 0) -> list[LabelledAnswer]:
    """The labelled answers of ``path`` (see the module docstring); ``scenario`` supplies tasks and labels."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UserError(f"cannot read answers {path}: {exc.strerror or exc}") from None
    known = {t.task_id: t for t in scenario.tasks(seed=seed)} if scenario is not None else {}
    answers: list[LabelledAnswer] = []
    for number, raw in enumerate(lines, start=1):
        if raw.strip():
            answers += _answers_of(_line(raw, f"{path}:{number}"), known, scenario, f"{path}:{number}")
    if not answers:
        raise UserError(f"{path} holds no answer to judge")
    if all(a.label is None for a in answers):
        raise UserError(f"{path}: no answer has a label, and {_no_labeller(scenario)}: give each a `label`")
    return answers


def _no_labeller(scenario: Scenario | None) -> str:
    """Why nothing labelled the answers (a card without labels cannot pass its agreement)."""
    if scenario is None:
        return "no --scenario grades them"
    return f"scenario {scenario.name!r} has no program grade for them"


def _line(raw: str, where: str) -> _Line:
    try:
        return msgspec.convert(json.loads(raw), _Line)
    except (ValueError, msgspec.ValidationError) as exc:
        raise UserError(f"{where}: not an answers line: {exc}") from None


def _answers_of(line: _Line, known: dict[str, Task], scenario: Scenario | None, where: str) -> list[LabelledAnswer]:
    task = _task(line, known, scenario, where)
    given = [*line.answers, *([_Answer(line.answer, line.label)] if line.answer is not None else [])]
    if not given:
        raise UserError(f"{where}: no answers (give `answers` or `answer`)")
    return [_labelled(a, task, scenario) for a in given]


def _task(line: _Line, known: dict[str, Task], scenario: Scenario | None, where: str) -> Task:
    if line.prompt is not None:
        name = "answers" if scenario is None else type(scenario).__name__
        return Task(task_id=line.task_id, scenario=name, prompt=line.prompt, gold=line.gold, reference=line.reference)
    if line.task_id not in known:
        raise UserError(f"{where}: no `prompt`, and no task {line.task_id!r} in the scenario to take it from")
    return known[line.task_id]


def _labelled(answer: _Answer, task: Task, scenario: Scenario | None) -> LabelledAnswer:
    """The answer with its label: the file's (a person's), else its scenario's program grade, else none."""
    if answer.label is not None:
        return LabelledAnswer(task=task, text=answer.text, label=answer.label, source="human")
    verdict = scenario.grade(task, answer.text) if scenario is not None else None
    if verdict is None:
        return LabelledAnswer(task=task, text=answer.text)
    return LabelledAnswer(task=task, text=answer.text, label=verdict.passed, source="program")
