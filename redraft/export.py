"""``redraft export``: a run as flat tables (Parquet or CSV) for pandas, DuckDB or a spreadsheet.

Two tables, both written by streaming (rows go out in batches, never the whole run
in memory):

- ``results``: one row per task, the ``results.jsonl`` record flattened: nested
  usage becomes ``usage_input_tokens``, ``usage_cost_usd``..., and each role's
  usage ``<role>_calls``, ``<role>_cost_usd``... (a role a task did not use is 0).
- ``rounds``: one row per task and decided round, from the trace's ``decision``
  frames: the action, stop reason, best score so far and this round's best.

The columns are fixed before the first row is written: a first pass over
``results.jsonl`` finds the roles, and any top-level field this version does not
know (written by a newer one), which is exported too rather than dropped.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from redraft.errors import UserError
from redraft.history import build_history
from redraft.runreader import Record, RunReader

FORMATS = ("parquet", "csv")
TABLES = ("results", "rounds")
BATCH = 5000

USAGE_FIELDS: dict[str, str] = {
    "input_tokens": "int",
    "output_tokens": "int",
    "calls": "int",
    "cached_tokens": "int",
    "cost_usd": "float",
    "cache_hits": "int",
}
RESULT_FIELDS: dict[str, str] = {
    "task_id": "str",
    "scenario": "str",
    "answer": "str",
    "text": "str",
    "score": "float",
    "passed": "bool",
    "initial_score": "float",
    "initial_passed": "bool",
    "rounds": "int",
    "stop_reason": "str",
    "wall_s": "float",
    "error": "str",
    "unpriced_models": "str",
}
ROUND_FIELDS: dict[str, str] = {
    "task_id": "str",
    "round": "int",
    "action": "str",
    "reason": "str",
    "best_round": "int",
    "best_sample": "int",
    "best_score": "float",
    "round_best_score": "float",
    "rolled_back": "bool",
    "best_passed": "bool",
    "candidates": "int",
    "detail": "str",
}
USAGE_SUFFIXES = tuple(f"_{k}" for k in USAGE_FIELDS)
# Flattened into their own columns (usage), or not analysis data (the trace offset).
SKIPPED = {"trace_end", "usage", "usage_by_role"}


def export(root: Path, fmt: str, *, table: str = "results", out: Path | None = None) -> tuple[Path, int]:
    """Write one table of the run at ``root``; return its path and row count.

    ``fmt`` is one of `FORMATS`, ``table`` one of `TABLES`; `UserError` otherwise.
    """
    if fmt not in FORMATS:
        raise UserError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if table not in TABLES:
        raise UserError(f"--table must be one of {', '.join(TABLES)}, got {table!r}")
    reader = RunReader(root)
    if table == "results":
        columns = results_columns(reader)
        rows: Iterator[dict[str, Any]] = (flatten(e.record, columns) for e in reader.entries())
    else:
        columns = dict(ROUND_FIELDS)
        rows = round_rows(reader)
    path = out or root / f"{table}.{fmt}"
    path.parent.mkdir(parents=True, exist_ok=True)
    count = _write_parquet(path, columns, rows) if fmt == "parquet" else _write_csv(path, columns, rows)
    return path, count


def results_columns(reader: RunReader) -> dict[str, str]:
    """Column name -> type (``str``, ``int``, ``float``, ``bool``) of the results table."""
    roles: set[str] = set()
    unknown: dict[str, set[type]] = {}
    for entry in reader.entries():
        roles.update((entry.record.get("usage_by_role") or {}).keys())
        for key, value in entry.record.items():
            if key not in RESULT_FIELDS and key not in SKIPPED and value is not None:
                unknown.setdefault(key, set()).add(type(value))
    columns = dict(RESULT_FIELDS)
    columns.update({f"usage_{k}": t for k, t in USAGE_FIELDS.items()})
    for role in sorted(roles):
        columns.update({f"{role}_{k}": t for k, t in USAGE_FIELDS.items()})
    for key, types in sorted(unknown.items()):
        columns.setdefault(key, _column_type(types))
    return columns


def _column_type(types: set[type]) -> str:
    if types == {bool}:
        return "bool"
    if types == {int}:
        return "int"
    if types <= {int, float}:
        return "float"
    return "str"


def flatten(record: Record, columns: dict[str, str]) -> dict[str, Any]:
    """One results row: nested usage spread into columns, values coerced to the column's type."""
    flat: dict[str, Any] = dict(record)
    flat["unpriced_models"] = ",".join(record.get("unpriced_models") or [])
    for key, value in (record.get("usage") or {}).items():
        flat[f"usage_{key}"] = value
    for role, usage in (record.get("usage_by_role") or {}).items():
        for key, value in usage.items():
            flat[f"{role}_{key}"] = value
    row = {}
    for name, kind in columns.items():
        value = flat.get(name)
        if value is None and name not in RESULT_FIELDS and name.endswith(USAGE_SUFFIXES):
            value = 0  # a role this task never called spent nothing
        row[name] = _coerce(value, kind)
    return row


def round_rows(reader: RunReader) -> Iterator[dict[str, Any]]:
    for entry, frames in reader.tasks():
        history = build_history(entry.task_id, frames)
        for rnd in history.rounds:
            decision = rnd.decision
            if decision is None:
                continue
            best = history.best_of(decision)
            row = {name: _coerce(decision.get(name), kind) for name, kind in ROUND_FIELDS.items()}
            row["task_id"] = entry.task_id
            row["round"] = rnd.number
            row["best_passed"] = bool(best.passed) if best is not None else False
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


def _write_csv(path: Path, columns: dict[str, str], rows: Iterator[dict[str, Any]]) -> int:
    count = 0
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns))
        writer.writeheader()
        for row in rows:
            writer.writerow(row)
            count += 1
    return count


def _write_parquet(path: Path, columns: dict[str, str], rows: Iterator[dict[str, Any]]) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is a dependency; a broken install says so
        raise UserError("Parquet export needs pyarrow (pip install pyarrow), or use --format csv") from None
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
