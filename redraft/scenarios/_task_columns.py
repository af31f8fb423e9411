"""``--columns``: which column of a task file (CSV, Parquet, or a key of a JSON line) holds which task field.

Syntax: ``FIELD=COLUMN[:TYPE]``, comma-separated, e.g.
``id=question_id:str,prompt=question,reference.answer=gold_answer:int``.

Without ``--columns``, a CSV or Parquet file's header must name task fields (``id``, ``prompt``,
``reference``, ``feedback``, ``reference.KEY``, ``feedback.KEY``), every column of it: a column named
otherwise is an error, as an unknown field of a JSON line is.

Invariant: a mapping is checked whole when parsed (`ColumnMap.parse`), and against a table's header
before its first row is read (`ColumnMap.check_header`), so a misspelt column stops the command before
anything starts, with the columns the file has.

See docs/architecture.md, section "Task file columns".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from redraft.errors import UserError, did_you_mean
from redraft.scenarios._json_values import (
    FIELDS,
    KINDS,
    WHOLE,
    Kind,
    converted,
    decode_json,
    json_type,
    quoted,
    shown,
    value_fault,
)

TARGETS = (*FIELDS, "reference.KEY", "feedback.KEY")
"""What an entry may map a column to, as the messages name them."""
_ABSENT = object()


@dataclass(frozen=True)
class Column:
    """One entry: the task ``field`` (and ``key`` inside it) that ``column`` holds, read as ``kind``."""

    field: str
    key: str | None
    column: str
    kind: Kind | None = None

    @property
    def target(self) -> str:
        return self.field if self.key is None else f"{self.field}.{self.key}"


@dataclass(frozen=True)
class ColumnMap:
    """Which column holds which task field; `parse` makes one from ``--columns``, `from_header` from a header."""

    entries: tuple[Column, ...]
    given: bool = True
    """Made from ``--columns`` (False: from a header, whose columns are named after the fields)."""

    @classmethod
    def parse(cls, text: str) -> ColumnMap:
        """The mapping ``--columns`` says; `UserError` naming the entry at fault."""
        entries = [_entry(part.strip()) for part in text.split(",") if part.strip()]
        if not entries:
            raise UserError("--columns is empty: give FIELD=COLUMN pairs, e.g. --columns id=qid,prompt=question")
        seen: set[str] = set()
        for entry in entries:
            if entry.target in seen:
                raise UserError(f"--columns maps {entry.target!r} twice: give it one column")
            seen.add(entry.target)
        for field in ("id", "prompt"):  # not mapped: read from the column of its own name
            if field not in seen:
                entries.append(Column(field, None, field))
        return cls(tuple(entries))

    @classmethod
    def from_header(cls, where: str, header: list[str]) -> ColumnMap:
        """The mapping of a file with no ``--columns``: each column named after the field it holds."""
        entries = []
        for name in header:
            field, _, key = name.partition(".")
            if name not in FIELDS and not (field in WHOLE and key):
                near = did_you_mean(name, TARGETS)
                raise UserError(
                    f"{where}: the column {quoted(name)} is not a task field ({near}fields: {', '.join(TARGETS)}); "
                    "name the file's columns with --columns, e.g. --columns id=COLUMN,prompt=COLUMN"
                )
            entries.append(Column(field, key or None, name))
        entries += [Column(field, None, field) for field in ("id", "prompt") if field not in header]  # named missing
        return cls(tuple(entries), given=False)

    def check_header(self, where: str, header: list[str]) -> None:
        """`UserError` for a column named twice in ``header`` or one the mapping reads that it lacks."""
        if twice := sorted({name for name in header if header.count(name) > 1}):
            raise UserError(f"{where}: the column {quoted(twice[0])} appears twice in the header")
        for entry in self.entries:
            if entry.column not in header:
                how = f"--columns {entry.target}=..." if self.given else f"--columns {entry.target}=COLUMN"
                raise UserError(
                    f"{where}: no column {quoted(entry.column)} (the {entry.target}; map it with {how}); "
                    f"its columns: {_listed(header)}"
                )

    @property
    def columns(self) -> list[str]:
        """The columns the mapping reads, each once, in its order."""
        return list(dict.fromkeys(entry.column for entry in self.entries))

    def record(self, where: str, row: dict[str, Any]) -> dict[str, Any]:
        """The task record (``id``, ``prompt``, ``reference``, ``feedback``) one row makes; `UserError` starting
        with ``where`` for a cell that cannot be read as its entry says."""
        record: dict[str, Any] = {}
        for entry in self.entries:
            value = _cell(where, entry, row.get(entry.column))
            if value is _ABSENT:
                continue
            if entry.key is None and entry.field in WHOLE:  # a whole object, merged with the keys others gave it
                given = record.get(entry.field, {})
                if clash := sorted(set(given) & set(value)):
                    at = f"by column {quoted(entry.column)} too"
                    raise UserError(f"{where}: '{entry.field}.{clash[0]}' is given twice ({at})")
                record[entry.field] = {**value, **given}
                continue
            if entry.key is None:
                record[entry.field] = value
                continue
            inner = record.setdefault(entry.field, {})
            if not isinstance(inner, dict) or entry.key in inner:
                raise UserError(f"{where}: {entry.target!r} is given twice (by column {quoted(entry.column)} too)")
            inner[entry.key] = value
        for entry in self.entries:
            if entry.field in ("id", "prompt") and entry.field not in record:
                raise UserError(f"{where}: missing field {entry.field!r} ({quoted(entry.column)} is empty or absent)")
        return record


def _entry(text: str) -> Column:
    target, equals, column = text.partition("=")
    target, column = target.strip(), column.strip()
    if not equals or not target or not column:
        raise UserError(f"--columns: {quoted(text)} is not FIELD=COLUMN (e.g. prompt=question)")
    field, _, key = target.partition(".")
    if target not in FIELDS and not (field in WHOLE and key):
        near = did_you_mean(target, TARGETS)
        raise UserError(f"--columns: unknown field {quoted(target)} ({near}fields: {', '.join(TARGETS)})")
    name, colon, kind = column.rpartition(":")
    if colon and kind in KINDS and name:
        return Column(field, key or None, name, kind)
    if colon and re.fullmatch(r"[a-z]+", kind):
        near = did_you_mean(kind, KINDS)
        raise UserError(f"--columns: unknown type {quoted(kind)} in {quoted(text)} ({near}types: {', '.join(KINDS)})")
    return Column(field, key or None, column)


def _cell(where: str, entry: Column, value: Any) -> Any:
    """One cell as the entry reads it; `_ABSENT` for an empty one."""
    if value is None or value == "":
        return _ABSENT
    at = f"{where}, column {quoted(entry.column)}"
    if entry.kind is None and entry.field in WHOLE and entry.key is None and isinstance(value, str):
        value = decode_json(at, value)  # an object written as JSON text
    elif entry.kind is not None:
        value = converted(at, value, entry.kind)
    elif entry.field in ("id", "prompt") and not isinstance(value, str):
        hint = f"; read it as text with --columns {entry.field}={entry.column}:str" if isinstance(value, int) else ""
        raise UserError(f"{at}: the {entry.field} must be text, got {json_type(value)}{hint}")
    if fault := value_fault(value, entry.target, 2 if entry.key else 1):
        raise UserError(f"{at}: {shown(fault[0])}: {fault[1]}")
    if entry.field in WHOLE and entry.key is None and not isinstance(value, dict):
        raise UserError(
            f"{where}, column {quoted(entry.column)}: {entry.field!r} must be an object, got {json_type(value)}"
        )
    return value


def _listed(header: list[str]) -> str:
    shown_names = ", ".join(header[:12]) + (f" and {len(header) - 12} more" if len(header) > 12 else "")
    return shown_names or "none"
