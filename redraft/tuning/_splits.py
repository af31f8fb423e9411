"""A tune's tasks in three splits, by seed: *train* (what the proposer learns from), *validation* (what
chooses among candidates) and *test* (read once, for the verdict).

Invariants:

- No task is in two splits, and no prompt either: tasks are grouped by their prompt's text, and a group
  goes whole to one split (two tasks that ask the same thing in two splits would let a test task be
  learnt from). `check_disjoint` refuses splits that break this, wherever they came from.
- The same tasks, fractions and seed give the same splits: each group's place is a keyed hash of its
  prompt, so a split does not depend on the tasks' order, and adding a task moves no other.
- Each split is written as a task file (`write_tasks`) that redraft reads back as the same tasks, gold
  held out as before: an evaluation is an ordinary run over it.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import msgspec

from redraft.errors import UserError
from redraft.protocols.messages import Task

Split = Literal["train", "validation", "test"]
SPLITS: tuple[Split, ...] = ("train", "validation", "test")
DEFAULT_FRACTIONS = (0.4, 0.3, 0.3)


class Splits(msgspec.Struct, frozen=True, kw_only=True):
    """Task ids by split, and how they were drawn."""

    seed: int
    fractions: tuple[float, float, float]
    train: list[str]
    validation: list[str]
    test: list[str]

    def of(self, split: Split) -> list[str]:
        ids: list[str] = getattr(self, split)
        return ids


def parse_fractions(text: str) -> tuple[float, float, float]:
    """``0.4,0.3,0.3``: the train, validation and test shares; `UserError` unless three positive shares
    summing to 1."""
    try:
        parts = tuple(float(p) for p in text.split(","))
    except ValueError:
        raise UserError(f"--split {text!r}: give three shares, train,validation,test, e.g. 0.4,0.3,0.3") from None
    if len(parts) != 3 or any(not 0 < p < 1 for p in parts) or abs(sum(parts) - 1) > 1e-6:
        raise UserError(f"--split {text!r}: three shares, each in (0, 1), summing to 1 (e.g. 0.4,0.3,0.3)")
    return parts[0], parts[1], parts[2]


def split_tasks(tasks: Iterable[Task], fractions: Sequence[float] = DEFAULT_FRACTIONS, seed: int = 0) -> Splits:
    """The tasks' ids in three splits; `UserError` if a split would be empty."""
    tasks = list(tasks)
    train, validation, test = _divided(tasks, fractions, seed)
    splits = Splits(
        seed=seed, fractions=(fractions[0], fractions[1], fractions[2]), train=train, validation=validation, test=test
    )
    return _checked(splits, tasks)


def labelled_splits(
    tasks: Sequence[Task], labelled: Iterable[str], fractions: Sequence[float] = DEFAULT_FRACTIONS, seed: int = 0
) -> Splits:
    """The splits of a tune whose train evidence is people's labels (``--train-labels``): train is the labelled
    tasks, and the others are split into validation and test by seed, in the shares the fractions give those two.
    A task that asks what a labelled one asks is in no split (train would be learnt into validation or test)."""
    chosen = set(labelled)
    asked = {_same(task.prompt) for task in tasks if task.task_id in chosen}
    rest = [task for task in tasks if task.task_id not in chosen and _same(task.prompt) not in asked]
    held = fractions[1] + fractions[2]
    validation, test = _divided(rest, (fractions[1] / held, fractions[2] / held), seed)
    splits = Splits(
        seed=seed,
        fractions=(fractions[0], fractions[1], fractions[2]),
        train=[task.task_id for task in tasks if task.task_id in chosen],
        validation=validation,
        test=test,
    )
    return _checked(splits, tasks)


def _divided(tasks: Sequence[Task], fractions: Sequence[float], seed: int) -> list[list[str]]:
    """The tasks' ids in as many parts as ``fractions`` (shares summing to 1), whole prompt groups each, by
    seed; the last part takes what the others leave."""
    groups: dict[str, list[str]] = {}
    for task in tasks:
        groups.setdefault(_same(task.prompt), []).append(task.task_id)
    order = sorted(groups, key=lambda key: _place(key, seed))
    parts, start = [], 0
    for share in fractions[:-1]:
        end = start + round(len(order) * share)
        parts.append(order[start:end])
        start = end
    parts.append(order[start:])
    return [[i for key in part for i in groups[key]] for part in parts]


def _checked(splits: Splits, tasks: Sequence[Task]) -> Splits:
    """``splits``, or `UserError` naming the first split left empty."""
    empty = [name for name in SPLITS if not splits.of(name)]
    if empty:
        distinct = len({_same(task.prompt) for task in tasks})
        raise UserError(
            f"{distinct} distinct tasks leave the {empty[0]} split empty; give more tasks (--limit) or other --split"
        )
    return splits


def check_disjoint(splits: Splits, tasks: Sequence[Task]) -> None:
    """`UserError` naming the first task id, or prompt, found in two splits."""
    by_id = {task.task_id: task for task in tasks}
    seen_ids: dict[str, Split] = {}
    seen_prompts: dict[str, tuple[Split, str]] = {}
    for split in SPLITS:
        for task_id in splits.of(split):
            if task_id in seen_ids and seen_ids[task_id] != split:
                raise UserError(f"the splits overlap: task {task_id!r} is in {seen_ids[task_id]} and in {split}")
            seen_ids[task_id] = split
            task = by_id.get(task_id)
            if task is None:
                raise UserError(f"the splits name task {task_id!r}, which the tasks do not have")
            key = _same(task.prompt)
            other = seen_prompts.setdefault(key, (split, task_id))
            if other[0] != split:
                raise UserError(
                    f"the splits overlap: tasks {other[1]!r} ({other[0]}) and {task_id!r} ({split}) ask the same"
                )


def write_tasks(tasks: Iterable[Task], path: Path) -> Path:
    """The tasks as a task file redraft reads back as the same tasks: the feedback's data as ``feedback``,
    the gold as ``reference`` (which the scenario holds out again, `Scenario.split_reference`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"id": t.task_id, "prompt": t.prompt, "reference": t.gold, "feedback": t.reference}) for t in tasks
    ]
    part = path.with_name(f"{path.name}.{uuid.uuid4().hex}.part")  # two evaluations may write one set at once
    part.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    part.replace(path)
    return path


def _same(prompt: str) -> str:
    return hashlib.sha256(" ".join(prompt.split()).encode()).hexdigest()


def _place(key: str, seed: int) -> str:
    return hashlib.blake2b(key.encode(), key=f"redraft-split\0{seed}".encode()[:64], digest_size=16).hexdigest()
