"""Task files people bring: JSON lines, CSV or Parquet, one task per line or row, read on the driver and streamed.

The format is the file's suffix: ``.csv`` is CSV, ``.parquet`` (or ``.pq``) Parquet, anything else
JSON lines. JSON lines (UTF-8, one JSON object per line; blank lines are skipped)::

    {"id": "capital-fr", "prompt": "What is the capital of France?", "reference": {"answer": "Paris"}}

Invariant: `validate_task_file` reads the whole file before anything starts, and
brings each line or row to the point where it is known to travel: the `Task` built (the
reference split by the scenario) and encoded. It raises one `UserError` naming the
file, the line or row and what is wrong (bad JSON, a limit, a missing, unknown or
wrong-typed field, a missing column, a duplicate id, no task at all), so a bad line can never stop a
run halfway, after the tasks before it ran. `iter_tasks` then streams the same file
through the same steps, so a large file is never held in memory (only its ids
are, to find duplicates). `read_task_file`, what a run resolves its ``--tasks`` to, does the check and hashes
the file's bytes for the run's identity in the same read: the file is opened once (`TaskFile`).

See docs/architecture.md, section "Task files: fields and limits".
"""

from __future__ import annotations

import hashlib
import io
import stat
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from redraft.errors import ProtocolError, UserError
from redraft.protocols.messages import Task, encode
from redraft.scenarios._base import Scenario
from redraft.scenarios._json_values import (
    FIELDS,
    MAX_DEPTH,
    MAX_ID_CHARS,
    MAX_INT,
    MAX_STRING_CHARS,
    MIN_INT,
    checked_record,
    decode_json,
    json_type,
    quoted,
)
from redraft.scenarios._task_columns import ColumnMap
from redraft.scenarios._task_tables import csv_rows, parquet_rows

__all__ = [
    "FIELDS",
    "MAX_DEPTH",
    "MAX_ID_CHARS",
    "MAX_INT",
    "MAX_LINE_BYTES",
    "MAX_STRING_CHARS",
    "MAX_TASK_BYTES",
    "MIN_INT",
    "TaskFile",
    "file_format",
    "iter_tasks",
    "read_task_file",
    "task_file_identity",
    "validate_task_file",
]

MAX_LINE_BYTES = 8 * 1024 * 1024
MAX_TASK_BYTES = 2 * 1024 * 1024

Format = Literal["jsonl", "csv", "parquet"]
_SUFFIXES: dict[str, Format] = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_BOM = b"\xef\xbb\xbf"


def file_format(path: str | Path) -> Format:
    """A task file's format, by its suffix: ``.csv``, ``.parquet`` or ``.pq``; anything else is JSON lines."""
    return _SUFFIXES.get(Path(path).suffix.lower(), "jsonl")


class _HashedRead(io.RawIOBase):
    """A file's bytes as a reader takes them, hashed on the way: each byte once, in file order, however the reader
    moves (a Parquet reader jumps to the footer first); `digest` reads what it skipped."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("rb", buffering=0)
        self._sha256 = hashlib.sha256()
        self._hashed = 0  # every byte before this offset is in the hash

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def readinto(self, buffer: Any) -> int:
        start = self._file.tell()
        count = self._file.readinto(buffer) or 0
        if start <= self._hashed < start + count:
            self._sha256.update(memoryview(buffer)[self._hashed - start : count])
            self._hashed = start + count
        return count

    def close(self) -> None:
        self._file.close()
        super().close()

    def digest(self) -> str:
        """The SHA-256 of the whole file, its bytes not read yet read now (the reader's place is kept)."""
        place = self._file.tell()
        self._file.seek(self._hashed)
        while block := self._file.read(1 << 20):
            self._sha256.update(block)
            self._hashed += len(block)
        self._file.seek(place)
        return self._sha256.hexdigest()


def _open(path: Path) -> io.BufferedReader:
    """The file, opened for bytes and hashed as it is read (`_HashedRead`); `UserError` unless it is a regular
    file that can be read."""
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise UserError(f"task file {path} is a directory")
        if not stat.S_ISREG(mode):  # a pipe or a device: read once to validate, it could not be read again
            raise UserError(f"task file {path} is not a regular file (a pipe or a device?): save the tasks to a file")
        return io.BufferedReader(_HashedRead(path))
    except FileNotFoundError:
        raise UserError(f"task file not found: {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read task file {path}: {exc.strerror}") from None


def _lines(path: Path, handle: io.BufferedReader) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line of ``handle``; `UserError` for a line too long or not UTF-8."""
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


Rows = Iterator[tuple[str, dict[str, Any], ColumnMap | None]]
"""(where, the line's object or the row's cells, the map that reads them: None for a JSON line's object, taken
as it is)."""


def _json_rows(path: Path, handle: io.BufferedReader, columns: ColumnMap | None) -> Rows:
    """Each line's object, to be read through ``columns`` when given.

    A key ``columns`` reads that no line has is an error once the file is read: a misspelt key would
    otherwise leave every task without what it names."""
    unseen, read = set(columns.columns) if columns is not None else set(), False
    for number, text in _lines(path, handle):
        read = True
        where = f"task file {path}, line {number}"
        value = decode_json(where, text)
        if not isinstance(value, dict):
            raise UserError(f"{where}: expected a JSON object, got {json_type(value)}")
        unseen -= value.keys()
        yield where, value, columns
    if unseen and read:
        raise UserError(f"task file {path}: --columns reads the key {quoted(min(unseen))}, which no line has")


def _table_rows(path: Path, handle: io.BufferedReader, kind: Format, columns: ColumnMap | None) -> Rows:
    """Each row of a CSV or Parquet file, to be read through ``columns`` or, without, its header's names."""
    where = f"task file {path}"
    mapping = columns

    def wanted(header: list[str]) -> list[str]:
        nonlocal mapping
        mapping = mapping or ColumnMap.from_header(where, header)
        mapping.check_header(where, header)
        return mapping.columns

    rows = csv_rows(handle, where, wanted) if kind == "csv" else parquet_rows(handle, where, wanted)
    for number, row in rows:
        yield f"{where}, row {number}", row, mapping  # set by `wanted`, before the first row


def _task(where: str, record: dict[str, Any], owner: Scenario) -> Task:
    """The task a line or row makes from its checked record (`checked_record`), encoded once to know it can
    travel; `UserError` if it cannot or is too large."""
    reference, gold = owner.split_reference(record.get("reference", {}))
    feedback = record.get("feedback", {})
    if both := sorted(set(feedback) & (set(reference) | set(gold))):
        raise UserError(f"{where}: {quoted(both[0])} is in both 'feedback' and 'reference'; keep it in one")
    reference = {**reference, **feedback}
    task = Task(task_id=record["id"], scenario=owner.name, prompt=record["prompt"], reference=reference, gold=gold)
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


_EMPTY = {
    "jsonl": "no tasks (the file is empty); write one JSON object per line",
    "csv": "no tasks (the file has a header and no rows)",
    "parquet": "no tasks (the file has no rows)",
}


def _tasks(path: Path, owner: Scenario, columns: str | None) -> Generator[Task, None, str]:
    """The file's tasks, each checked; returns, once every task is read, the SHA-256 of the file's bytes."""
    mapping = ColumnMap.parse(columns) if columns is not None else None
    kind = file_format(path)
    with _open(path) as handle:
        rows = _table_rows(path, handle, kind, mapping) if kind != "jsonl" else _json_rows(path, handle, mapping)
        first_seen: dict[str, str] = {}
        for where, row, columns_of in rows:  # each line or row read through its map, checked, made a task
            record = checked_record(where, row if columns_of is None else columns_of.record(where, row))
            task = _task(where, record, owner)
            if task.task_id in first_seen:
                raise UserError(f"{where}: duplicate id {task.task_id!r} (first on {first_seen[task.task_id]})")
            first_seen[task.task_id] = where.rpartition(", ")[2]
            yield task
        if not first_seen:
            raise UserError(f"task file {path}: {_EMPTY[kind]}")
        raw = handle.raw
        assert isinstance(raw, _HashedRead)  # made so by `_open`
        return raw.digest()


@dataclass(frozen=True)
class TaskFile:
    """A task file checked whole as tasks of ``scenario`` (`read_task_file`), and the hash of the bytes read."""

    path: str
    """As given: what a run's identity names."""
    scenario: Scenario
    columns: str | None
    """``--columns``, as given."""
    count: int
    """Its tasks."""
    sha256: str
    """Of its bytes, as the check read them."""

    @property
    def identity(self) -> dict[str, str]:
        """What identifies the file in a run's fingerprint (as `task_file_identity` says)."""
        return {"path": self.path, "sha256": self.sha256}

    def tasks(self) -> Iterator[Task]:
        """The file's tasks in file order, streamed afresh through the same steps."""
        return _tasks(Path(self.path), self.scenario, self.columns)


def read_task_file(path: str | Path, scenario: Scenario, columns: str | None = None) -> TaskFile:
    """The whole file checked as tasks of ``scenario``, its columns read as ``columns`` (``--columns``) says, and
    hashed in the same read; `UserError` (file, line or row, what) on the first fault."""
    tasks, count = _tasks(Path(path), scenario, columns), 0
    while True:
        try:
            next(tasks)
        except StopIteration as read:
            return TaskFile(str(path), scenario, columns, count, read.value)
        count += 1


def validate_task_file(path: str | Path, scenario: Scenario, columns: str | None = None) -> int:
    """Check the whole file as tasks of ``scenario`` (`read_task_file`); the number of tasks in it."""
    return read_task_file(path, scenario, columns).count


def iter_tasks(path: str | Path, scenario: Scenario, columns: str | None = None) -> Iterator[Task]:
    """The file's tasks in file order, as tasks of ``scenario``. Validate the file first."""
    return _tasks(Path(path), scenario, columns)


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
