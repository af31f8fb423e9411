"""Task files people bring: JSON lines, one task per line, read on the driver and streamed.

Format (UTF-8, one JSON object per line; blank lines are skipped)::

    {"id": "capital-fr", "prompt": "What is the capital of France?", "reference": {"answer": "Paris"}}

- ``id`` (string, required, unique in the file): the task id in results and traces.
- ``prompt`` (string, required, non-empty): what the drafter is asked.
- ``reference`` (object, optional): data for the check or the grade, never shown
  to a model. The scenario splits it (`Scenario.split_reference`): what a user
  has at inference time (a schema) is for the feedback, the rest (gold answers,
  hidden tests) is held out for the grade.

Invariant: `validate_task_file` reads the whole file before anything starts and
raises one `UserError` naming the file, the line and what is wrong (bad JSON, a
missing, unknown or wrong-typed field, a duplicate id, no task at all);
`iter_tasks` then streams the same file line by line, so a large file is never
held in memory (only its ids are, to find duplicates).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from redraft.errors import UserError
from redraft.protocols.messages import Task
from redraft.scenarios.base import get_scenario, split_reference

FIELDS = ("id", "prompt", "reference")
"""Allowed keys of one task line."""


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line; `UserError` if the file cannot be read as UTF-8."""
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise UserError(f"task file {path}, line {number}: not UTF-8 text") from None
                if text.strip():
                    yield number, text
    except FileNotFoundError:
        raise UserError(f"task file not found: {path}") from None
    except IsADirectoryError:
        raise UserError(f"task file {path} is a directory") from None


def _parse(path: Path, number: int, text: str) -> dict[str, Any]:
    where = f"task file {path}, line {number}"
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(record, dict):
        raise UserError(f"{where}: expected a JSON object, got {_json_type(record)}")
    unknown = sorted(set(record) - set(FIELDS))
    if unknown:
        raise UserError(f"{where}: unknown field {unknown[0]!r} (allowed: {', '.join(FIELDS)})")
    for field in ("id", "prompt"):
        if field not in record:
            raise UserError(f"{where}: missing field {field!r}")
        if not isinstance(record[field], str):
            raise UserError(f"{where}: {field!r} must be a string, got {_json_type(record[field])}")
        if not record[field].strip():
            raise UserError(f"{where}: {field!r} is empty")
    if not isinstance(record.get("reference", {}), dict):
        raise UserError(f"{where}: 'reference' must be an object, got {_json_type(record['reference'])}")
    return record


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def validate_task_file(path: str | Path) -> int:
    """Check the whole file; the number of tasks in it. `UserError` (file, line, what) on the first fault."""
    path = Path(path)
    first_seen: dict[str, int] = {}
    for number, text in _lines(path):
        task_id = _parse(path, number, text)["id"]
        if task_id in first_seen:
            raise UserError(
                f"task file {path}, line {number}: duplicate id {task_id!r} (first on line {first_seen[task_id]})"
            )
        first_seen[task_id] = number
    if not first_seen:
        raise UserError(f"task file {path}: no tasks (the file is empty); write one JSON object per line")
    return len(first_seen)


def iter_tasks(path: str | Path, scenario: str) -> Iterator[Task]:
    """The file's tasks in file order, as tasks of ``scenario``. Validate the file first."""
    path = Path(path)
    owner = get_scenario(scenario)
    for number, text in _lines(path):
        record = _parse(path, number, text)
        reference, gold = split_reference(owner, record.get("reference", {}))
        yield Task(task_id=record["id"], scenario=scenario, prompt=record["prompt"], reference=reference, gold=gold)


def task_file_identity(path: str | Path) -> dict[str, str]:
    """What identifies the file in a run's fingerprint: its path as given and the SHA-256 of its bytes."""
    digest = hashlib.sha256()
    try:
        with Path(path).open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise UserError(f"cannot read task file {path}: {exc.strerror}") from None
    return {"path": str(path), "sha256": digest.hexdigest()}
