"""``redraft export``: a run as flat tables (Parquet or CSV) for pandas, DuckDB or a spreadsheet.

Two tables, both written by streaming (rows go out in batches, never the whole run
in memory), their columns derived from the message Structs, not listed by hand:

- ``results``: one row per task, a column per `Result` field in the Struct's
  order; a `Usage` field is spread into ``usage_input_tokens``,
  ``usage_cost_usd``... (one column per `Usage` field), each role's usage into
  ``<role>_calls``, ``<role>_cost_usd``... (a role a task did not use is 0), and a
  list into one comma-separated text.
- ``rounds``: one row per task and decided round, a column per `Decision` field,
  plus whether the best so far passes its feedback (``best_passed``) and the
  held-out grade (``best_graded_pass``, empty when not graded), and how many
  candidates the round had (``candidates``).

The columns are fixed before the first row is written: a first pass over the
records finds the roles, and any field of a record this version does not know
(written by a newer one), which is exported too rather than dropped.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
from msgspec import inspect

from redraft.errors import missing_extra, unknown_name
from redraft.protocols.messages import Decision, Result, Usage
from redraft.rundir import RunReader, TaskEntry, build_history

FORMATS = ("parquet", "csv")
TABLES = ("results", "rounds")
BATCH = 5000
# The writer's wire version: the envelope of a frame, not data (records do not even keep it).
ENVELOPE = frozenset({"v"})

Columns = dict[str, str]
"""Column name -> type: ``str``, ``int``, ``float`` or ``bool``."""


def scalar_type(t: inspect.Type) -> str | None:
    """The column type of a field's type, or None if it is not one value (a Struct, a dict)."""
    match t:
        case inspect.UnionType(types=types):
            inner = [x for x in types if not isinstance(x, inspect.NoneType)]
            return scalar_type(inner[0]) if len(inner) == 1 else "str"
        case inspect.BoolType():
            return "bool"
        case inspect.IntType():
            return "int"
        case inspect.FloatType():
            return "float"
        case inspect.StrType() | inspect.LiteralType() | inspect.ListType():
            return "str"  # a list is joined into one text
    return None


def struct_columns(struct: type[msgspec.Struct]) -> Columns:
    """A column per one-value field of ``struct``, in its order, typed by its annotation."""
    info = inspect.type_info(struct)
    assert isinstance(info, inspect.StructType)
    columns: Columns = {}
    for f in info.fields:
        kind = scalar_type(f.type)
        if kind is not None and f.name not in ENVELOPE:
            columns[f.name] = kind
    return columns


USAGE_COLUMNS = struct_columns(Usage)
USAGE_SUFFIXES = tuple(f"_{k}" for k in USAGE_COLUMNS)
RESULT_COLUMNS = struct_columns(Result)
ROUND_COLUMNS = struct_columns(Decision) | {"best_passed": "bool", "best_graded_pass": "bool", "candidates": "int"}


def _fields_of_type(struct: type[msgspec.Struct], wanted: Any) -> list[str]:
    info = inspect.type_info(struct)
    assert isinstance(info, inspect.StructType)
    return [f.name for f in info.fields if f.type == wanted]


_USAGE = inspect.type_info(Usage)
USAGE_FIELDS = _fields_of_type(Result, _USAGE)
"""`Result` fields holding one `Usage`: spread into ``<field>_<usage field>``."""
ROLE_FIELDS = _fields_of_type(Result, inspect.DictType(key_type=inspect.StrType(), value_type=_USAGE))
"""`Result` fields holding a `Usage` per role: spread into ``<role>_<usage field>``."""


def export(root: Path, fmt: str, *, table: str = "results", out: Path | None = None) -> tuple[Path, int]:
    """Write one table of the run at ``root``; return its path and row count.

    ``fmt`` is one of `FORMATS`, ``table`` one of `TABLES`; `UserError` otherwise.
    """
    if fmt not in FORMATS:
        raise unknown_name("--format", fmt, FORMATS)
    if table not in TABLES:
        raise unknown_name("--table", table, TABLES)
    reader = RunReader(root)
    if table == "results":
        columns, entries = results_columns(reader)
        plan = _plan(columns)
        rows: Iterator[dict[str, Any]] = (flatten(e, plan) for e in entries)
    else:
        columns = dict(ROUND_COLUMNS)
        rows = round_rows(reader)
    path = out or root / f"{table}.{fmt}"
    path.parent.mkdir(parents=True, exist_ok=True)
    count = _write_parquet(path, columns, rows) if fmt == "parquet" else _write_csv(path, columns, rows)
    return path, count


def results_columns(reader: RunReader) -> tuple[Columns, Iterator[TaskEntry]]:
    """The results table's columns (the `Result` fields', each usage spread, then unknown fields), and the entries
    to write: found in the first of the two passes the entries take (`RunReader.entries`), not in two more."""
    roles: set[str] = set()
    unknown: dict[str, set[type]] = {}

    def note(entry: TaskEntry) -> None:
        for name in ROLE_FIELDS:
            roles.update(getattr(entry.result, name))
        for key, value in entry.extra.items():
            if value is not None:
                unknown.setdefault(key, set()).add(type(value))

    entries = reader.entries(note)
    first = next(entries, None)  # the first pass, every record noted
    columns = dict(RESULT_COLUMNS)
    for name in USAGE_FIELDS:
        columns.update({f"{name}_{k}": t for k, t in USAGE_COLUMNS.items()})
    for role in sorted(roles):
        columns.update({f"{role}_{k}": t for k, t in USAGE_COLUMNS.items()})
    for key, types in sorted(unknown.items()):
        columns.setdefault(key, _column_type(types))
    return columns, itertools.chain([] if first is None else [first], entries)


def _column_type(types: set[type]) -> str:
    if types == {bool}:
        return "bool"
    if types == {int}:
        return "int"
    if types <= {int, float}:
        return "float"
    return "str"


def flatten(entry: TaskEntry, plan: list[Column]) -> dict[str, Any]:
    """One results row: usages spread into columns, lists joined, values coerced to the column's type."""
    values: dict[str, Any] = msgspec.to_builtins(entry.result)
    flat: dict[str, Any] = entry.extra | values  # an extra never has a field's name; only columns are read below
    for name in _LISTS:
        flat[name] = ",".join(map(str, values[name]))
    for name in USAGE_FIELDS:
        flat.update({f"{name}_{k}": v for k, v in values[name].items()})
    for name in ROLE_FIELDS:
        for role, usage in values[name].items():
            flat.update({f"{role}_{k}": v for k, v in usage.items()})
    row = {}
    for name, kind, python, spent in plan:
        value = flat.get(name)
        if value is None and spent:
            value = 0  # a role this task never called spent nothing
        row[name] = value if type(value) is python else _coerce(value, kind)  # most are: no call
    return row


_TYPES = {"str": str, "int": int, "float": float, "bool": bool}
_LISTS = [f.name for f in inspect.type_info(Result).fields if isinstance(f.type, inspect.ListType)]  # type: ignore[attr-defined]
"""`Result` fields holding a list: joined into one text."""


Column = tuple[str, str, type, bool]
"""A results column as `flatten` fills it: its name, type, Python type, and whether it is a usage a task may not
have (0 then)."""


def _plan(columns: Columns) -> list[Column]:
    return [
        (name, kind, _TYPES[kind], name not in RESULT_COLUMNS and name.endswith(USAGE_SUFFIXES))
        for name, kind in columns.items()
    ]


def round_rows(reader: RunReader) -> Iterator[dict[str, Any]]:
    for entry, frames in reader.tasks():
        history = build_history(entry.task_id, frames)
        for rnd in history.rounds:
            if rnd.decision is None:
                continue
            decision = rnd.decision.message
            best = history.best_of(decision)
            row = {name: _coerce(getattr(decision, name, None), kind) for name, kind in ROUND_COLUMNS.items()}
            row["task_id"] = entry.task_id
            row["best_passed"] = bool(best.passed) if best is not None else False
            row["best_graded_pass"] = best.grade.passed if best is not None and best.grade is not None else None
            row["candidates"] = len(rnd.candidates)
            yield row


def _coerce(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "str":
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    try:
        return {"int": int, "float": float, "bool": bool}[kind](value)
    except (TypeError, ValueError):
        return None


def _write_csv(path: Path, columns: Columns, rows: Iterator[dict[str, Any]]) -> int:
    count = 0
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns))
        writer.writeheader()
        for row in rows:
            writer.writerow(row)
            count += 1
    return count


def _write_parquet(path: Path, columns: Columns, rows: Iterator[dict[str, Any]]) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError:
        raise missing_extra("Parquet export (or use --format csv)", "report") from None
    types = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}
    schema = pa.schema([(name, types[kind]) for name, kind in columns.items()])
    count = 0
    with pq.ParquetWriter(path, schema) as writer:
        batch: list[dict[str, Any]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= BATCH:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                count += len(batch)
                batch = []
        if batch or count == 0:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            count += len(batch)
    return count
