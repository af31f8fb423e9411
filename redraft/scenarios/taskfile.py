"""Task files people bring: JSON lines, one task per line, read on the driver and streamed.

Format (UTF-8, one JSON object per line; blank lines are skipped)::

    {"id": "capital-fr", "prompt": "What is the capital of France?", "reference": {"answer": "Paris"}}

- ``id`` (string, required, unique in the file): the task id in results and traces.
- ``prompt`` (string, required, non-empty): what the drafter is asked.
- ``reference`` (object, optional): data for the check or the grade, never shown
  to a model. The scenario splits it (`Scenario.split_reference`): what a user
  has at inference time (a schema) is for the feedback, the rest (gold answers,
  hidden tests) is held out for the grade.
- ``feedback`` (object, optional): data for the feedback check alone, never held
  out and never shown to a model: what a user has at inference time (a schema,
  the visible test cases, the rules of the task). The check reads it beside the
  part of ``reference`` the scenario gives it; a key may not be in both.

Limits (each fault names the file, the line and, inside a line, the value's path):

- a line holds at most `MAX_LINE_BYTES` (8 MiB) and a string `MAX_STRING_CHARS`
  (1,048,576 characters, an id `MAX_ID_CHARS`, 256); values nest at most
  `MAX_DEPTH` (32) levels, the line's object included;
- integers fit in 64 bits (`MIN_INT` to `MAX_INT`, what a frame can carry) and
  numbers are finite (JSON has no NaN or Infinity; Python's reader accepts them);
- strings are UTF-8 text: an escaped lone surrogate (``"\\ud800"``) is refused;
- a key appears once in an object;
- what one task may carry: its frame is at most `MAX_TASK_BYTES` (2 MiB).
  A task travels in every request of its loop and in the trace; past that, a
  run's trace grows by hundreds of megabytes per task.

Invariant: `validate_task_file` reads the whole file before anything starts, and
brings each line to the point where it is known to travel: the `Task` built (the
reference split by the scenario) and encoded. It raises one `UserError` naming the
file, the line and what is wrong (bad JSON, a limit, a missing, unknown or
wrong-typed field, a duplicate id, no task at all), so a bad line can never stop a
run halfway, after the tasks before it ran. `iter_tasks` then streams the same file
through the same steps, so a large file is never held in memory (only its ids
are, to find duplicates).
"""

from __future__ import annotations

import hashlib
import json
import math
import stat
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from redraft.errors import ProtocolError, UserError, did_you_mean
from redraft.protocols.messages import Task, encode
from redraft.scenarios._base import Scenario, get_scenario

FIELDS = ("id", "prompt", "reference", "feedback")
"""Allowed keys of one task line."""

MAX_LINE_BYTES = 8 * 1024 * 1024
MAX_TASK_BYTES = 2 * 1024 * 1024
MAX_STRING_CHARS = 1024 * 1024
MAX_ID_CHARS = 256
"""Ids name rows of every table, trace files and `redraft trace` arguments."""
MAX_DEPTH = 32
MIN_INT, MAX_INT = -(2**63), 2**64 - 1
"""The integers a MessagePack frame can carry."""

_BOM = b"\xef\xbb\xbf"


def _open(path: Path) -> BinaryIO:
    """The file, opened for bytes; `UserError` unless it is a regular file that can be read."""
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise UserError(f"task file {path} is a directory")
        if not stat.S_ISREG(mode):  # a pipe or a device: read once to validate, it could not be read again
            raise UserError(f"task file {path} is not a regular file (a pipe or a device?): save the tasks to a file")
        return path.open("rb")
    except FileNotFoundError:
        raise UserError(f"task file not found: {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read task file {path}: {exc.strerror}") from None


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line; `UserError` for a line too long or not UTF-8."""
    with _open(path) as handle:
        number = 0
        while raw := handle.readline(MAX_LINE_BYTES + 2):  # + room for the line end
            number += 1
            raw = raw.removeprefix(_BOM) if number == 1 else raw
            content = raw.rstrip(b"\r\n")
            if len(content) > MAX_LINE_BYTES:
                raise UserError(
                    f"task file {path}, line {number}: longer than {MAX_LINE_BYTES:,} bytes (8 MiB), the limit of "
                    f"a line; a task may carry at most {MAX_TASK_BYTES:,} bytes"
                )
            try:
                text = content.decode("utf-8")
            except UnicodeDecodeError:
                raise UserError(f"task file {path}, line {number}: not UTF-8 text") from None
            if text.strip():
                yield number, text


class _BigInt:
    """An integer literal too long to convert (Python refuses past 4,300 digits): refused by `_fault`."""

    def __init__(self, digits: str) -> None:
        self.digits = len(digits.lstrip("-"))


class _NonFinite:
    """``NaN``, ``Infinity`` or ``-Infinity``: Python's JSON reader accepts them; `_fault` refuses them."""

    def __init__(self, name: str) -> None:
        self.name = name


class _DuplicateKey(Exception):
    """A key seen twice in one object (Python's reader would keep the last silently)."""


def _read_int(digits: str) -> int | _BigInt:
    return _BigInt(digits) if len(digits.lstrip("-")) > 20 else int(digits)


def _read_float(literal: str) -> float | _NonFinite:
    value = float(literal)
    return value if math.isfinite(value) else _NonFinite(literal)  # 1e400 would be read as inf


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record = dict(pairs)
    if len(record) < len(pairs):
        raise _DuplicateKey(next(k for k, n in Counter(k for k, _ in pairs).items() if n > 1))
    return record


def _fault(value: Any, path: str, depth: int) -> tuple[str, str] | None:
    """Where (a path such as ``reference.tests[3]``) and what breaks a limit in ``value``, ``depth`` levels
    down; None when nothing does."""
    if isinstance(value, _BigInt):
        return path, f"an integer of {value.digits:,} digits; {_INT_RANGE}"
    if isinstance(value, _NonFinite):
        return path, f"{value.name} is not a finite number (JSON has no NaN or Infinity)"
    if isinstance(value, int) and not isinstance(value, bool) and not MIN_INT <= value <= MAX_INT:
        return path, f"{value} does not fit in 64 bits; {_INT_RANGE}"
    if isinstance(value, str):
        problem = _string_fault(value)
        return (path, problem) if problem else None
    if not isinstance(value, dict | list):
        return None
    if depth > MAX_DEPTH:
        return path, f"nested deeper than {MAX_DEPTH} levels, the limit"
    if isinstance(value, list):
        items = [(f"{path}[{i}]", item) for i, item in enumerate(value)]
    else:
        if problem := next(filter(None, map(_string_fault, value)), None):
            return f"{path or 'the line'}, a key", problem
        items = [(_child(path, key), item) for key, item in value.items()]
    return next(filter(None, (_fault(item, where, depth + 1) for where, item in items)), None)


def _child(path: str, key: str) -> str:
    name = key if key.isidentifier() and len(key) <= 40 else f"[{_quoted(key, 20)}]"
    return f"{path}{name}" if name.startswith("[") else f"{path}.{name}" if path else name


def _string_fault(text: str, limit: int = MAX_STRING_CHARS, what: str = "a string") -> str | None:
    if len(text) > limit:
        return f"{len(text):,} characters; {what} may hold at most {limit:,}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds a lone surrogate {text[exc.start]!r} at character {exc.start}, which is not UTF-8 text"
    return None


def _shown(path: str) -> str:
    """A path cut for a one-line message: its start and its end."""
    return path if len(path) <= 80 else f"{path[:40]}...{path[-37:]}"


_INT_RANGE = f"integers must be in [{MIN_INT:,}, {MAX_INT:,}] (64 bits): write a larger one as a string"


def _parse(where: str, text: str) -> dict[str, Any]:
    """One line as a checked record; `UserError` starting with ``where`` on its first fault."""
    try:
        record = json.loads(
            text, parse_int=_read_int, parse_float=_read_float, parse_constant=_NonFinite, object_pairs_hook=_object
        )
    except _DuplicateKey as exc:
        raise UserError(f"{where}: the key {_quoted(exc.args[0])} appears twice in one object") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:  # Python's reader gave up near 1,000 levels: far past the limit
        raise UserError(f"{where}: nested deeper than {MAX_DEPTH} levels, the limit") from None
    if not isinstance(record, dict):
        raise UserError(f"{where}: expected a JSON object, got {_json_type(record)}")
    unknown = sorted(set(record) - set(FIELDS))
    if unknown:
        near = did_you_mean(unknown[0], FIELDS) if isinstance(unknown[0], str) else ""
        raise UserError(f"{where}: unknown field {_quoted(unknown[0])} ({near}allowed: {', '.join(FIELDS)})")
    for field in ("id", "prompt"):
        if field not in record:
            raise UserError(f"{where}: missing field {field!r}")
        if not isinstance(record[field], str):
            raise UserError(f"{where}: {field!r} must be a string, got {_json_type(record[field])}")
        if not record[field].strip():
            raise UserError(f"{where}: {field!r} is empty")
    for field in ("reference", "feedback"):
        if not isinstance(record.get(field, {}), dict):
            raise UserError(f"{where}: {field!r} must be an object, got {_json_type(record[field])}")
    if problem := _string_fault(record["id"], MAX_ID_CHARS, "an id"):
        raise UserError(f"{where}: id: {problem}")
    if fault := _fault(record, "", 1):
        raise UserError(f"{where}: {_shown(fault[0])}: {fault[1]}")
    return record


def _quoted(text: str, limit: int = 40) -> str:
    """``text`` quoted for a one-line message, cut at ``limit`` characters."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def _json_type(value: Any) -> str:
    kinds = ((dict, "an object"), (list, "an array"), (str, "a string"), (bool, "a boolean"), (type(None), "null"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "a number")


def _task(where: str, record: dict[str, Any], scenario: str, owner: Scenario) -> Task:
    """The task a line makes, encoded once to know it can travel; `UserError` if it cannot or is too large."""
    reference, gold = owner.split_reference(record.get("reference", {}))
    feedback = record.get("feedback", {})
    if both := sorted(set(feedback) & (set(reference) | set(gold))):
        raise UserError(f"{where}: {_quoted(both[0])} is in both 'feedback' and 'reference'; keep it in one")
    reference = {**reference, **feedback}
    task = Task(task_id=record["id"], scenario=scenario, prompt=record["prompt"], reference=reference, gold=gold)
    try:
        size = len(encode(task))
    except ProtocolError as exc:
        raise UserError(f"{where}: {exc}") from None
    if size > MAX_TASK_BYTES:
        raise UserError(
            f"{where}: the task is {size:,} bytes as a frame; a task may carry at most {MAX_TASK_BYTES:,} "
            "bytes (2 MiB): shorten the prompt or the reference"
        )
    return task


def _tasks(path: Path, scenario: str) -> Iterator[Task]:
    owner = get_scenario(scenario)
    first_seen: dict[str, int] = {}
    for number, text in _lines(path):
        where = f"task file {path}, line {number}"
        task = _task(where, _parse(where, text), scenario, owner)
        if task.task_id in first_seen:
            raise UserError(f"{where}: duplicate id {task.task_id!r} (first on line {first_seen[task.task_id]})")
        first_seen[task.task_id] = number
        yield task
    if not first_seen:
        raise UserError(f"task file {path}: no tasks (the file is empty); write one JSON object per line")


def validate_task_file(path: str | Path, scenario: str) -> int:
    """Check the whole file as tasks of ``scenario``; the number of tasks in it. `UserError` (file, line, what)
    on the first fault."""
    return sum(1 for _ in _tasks(Path(path), scenario))


def iter_tasks(path: str | Path, scenario: str) -> Iterator[Task]:
    """The file's tasks in file order, as tasks of ``scenario``. Validate the file first."""
    return _tasks(Path(path), scenario)


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
