"""`redraft export`: flat results and rounds tables that round-trip through pyarrow and csv."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import msgspec
import pyarrow.parquet as pq
import pytest

from redraft.cli import main
from redraft.errors import UserError
from redraft.protocols.messages import Decision, Result, Usage
from redraft.rundir import KnownFrame, RunReader
from redraft.views.export import ROLE_FIELDS, USAGE_COLUMNS, USAGE_FIELDS, export
from tests.support.report_runs import FOREIGN_ID, make_foreign_run, make_run, records, redraft


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("export") / "run")


def test_parquet_results_have_one_flat_row_per_task(run_dir: Path) -> None:
    path, count = export(run_dir, "parquet")
    assert path == run_dir / "results.parquet" and count == 6
    table = pq.read_table(path)
    rows = table.to_pylist()
    recs = records(run_dir)
    assert [r["task_id"] for r in rows] == [r["task_id"] for r in recs]
    for row, rec in zip(rows, recs, strict=True):
        for key in ("scenario", "answer", "text", "score", "passed", "initial_score", "rounds", "stop_reason", "error"):
            assert row[key] == rec[key], key
        for key in ("grade", "graded_pass", "initial_grade", "initial_graded_pass"):  # held out, beside the feedback
            assert row[key] == rec[key], key
        for key, value in rec["usage"].items():  # type: ignore[attr-defined]
            assert row[f"usage_{key}"] == value
        for role in ("drafter", "critic"):
            usage = rec["usage_by_role"].get(role, {})  # type: ignore[attr-defined]
            assert row[f"{role}_calls"] == usage.get("calls", 0)  # 0 for a task that never called it
            assert row[f"{role}_cost_usd"] == pytest.approx(usage.get("cost_usd", 0.0))
    assert "trace_end" not in table.column_names and "usage" not in table.column_names
    assert str(table.schema.field("usage_cost_usd").type) == "double"
    assert str(table.schema.field("passed").type) == "bool"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert sum(table.column("usage_calls").to_pylist()) == summary["usage"]["calls"]
    assert sum(table.column("passed").to_pylist()) == summary["passed"]
    assert sum(bool(v) for v in table.column("graded_pass").to_pylist()) == summary["graded_passed"] == 3
    assert str(table.schema.field("graded_pass").type) == "bool"


def read_back(row: dict[str, Any]) -> Result:
    """A results row made a `Result` again: each usage gathered from its columns, each list split."""

    def usage(prefix: str) -> Usage:
        return Usage(**{k: row[f"{prefix}_{k}"] for k in USAGE_COLUMNS})

    record: dict[str, Any] = {}
    for name in Result.__struct_fields__:
        if name in ("kind", "v"):
            continue
        if name in USAGE_FIELDS:
            record[name] = usage(name)
        elif name in ROLE_FIELDS:  # a role the task never called is a column of zeros, absent from its record
            roles = {c.removesuffix("_input_tokens") for c in row if c.endswith("_input_tokens")} - set(USAGE_FIELDS)
            record[name] = {role: usage(role) for role in sorted(roles) if usage(role) != Usage()}
        elif isinstance(row[name], str) and name in ("unpriced_models", "retried_for"):
            record[name] = row[name].split(",") if row[name] else []
        else:
            record[name] = row[name]
    return msgspec.convert(record, Result)


def test_the_parquet_results_read_back_equal_to_the_json_lines_records(run_dir: Path) -> None:
    rows = pq.read_table(export(run_dir, "parquet")[0]).to_pylist()
    records = [entry.result for entry in RunReader(run_dir).entries()]
    assert len(rows) == len(records) == 6
    assert [read_back(row) for row in rows] == records
    assert any(r.usage_by_role for r in records) and any(r.error for r in records)  # the comparison covers both


def test_csv_results_match_the_parquet_table(run_dir: Path, tmp_path: Path) -> None:
    path, count = export(run_dir, "csv", out=tmp_path / "out" / "r.csv")
    parquet = pq.read_table(export(run_dir, "parquet", out=tmp_path / "r.parquet")[0]).to_pylist()
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert count == len(rows) == len(parquet) == 6
    assert list(rows[0]) == list(parquet[0])
    for row, ref in zip(rows, parquet, strict=True):
        assert row["task_id"] == ref["task_id"]
        assert int(row["usage_input_tokens"]) == ref["usage_input_tokens"]
        assert float(row["usage_cost_usd"]) == pytest.approx(ref["usage_cost_usd"])
        assert row["passed"] == str(ref["passed"])
        assert row["text"] == ref["text"]  # multi-line model text survives quoting


def test_rounds_table_has_a_row_per_decision(run_dir: Path) -> None:
    path, count = export(run_dir, "parquet", table="rounds")
    rows = pq.read_table(path).to_pylist()
    decisions = sum(
        1
        for _, frames in RunReader(run_dir).tasks()
        for f in frames
        if isinstance(f, KnownFrame) and isinstance(f.message, Decision)
    )
    assert count == len(rows) == decisions
    late = [
        (r["round"], r["action"], r["reason"], r["best_passed"], r["best_graded_pass"], r["candidates"])
        for r in rows
        if r["task_id"] == "suite/late"
    ]
    assert late == [
        (0, "continue", None, False, False, 2),
        (1, "continue", None, False, False, 2),
        (2, "stop", "threshold", True, True, 2),
    ]
    boom = [r for r in rows if r["task_id"] == "suite/boom"]
    assert [(r["action"], r["reason"], r["candidates"], r["best_graded_pass"]) for r in boom] == [
        ("stop", "error", 0, None)  # nothing to grade: missing, not False
    ]
    assert "backend exploded" in boom[0]["detail"]


def test_unknown_record_fields_and_roles_are_exported(tmp_path: Path) -> None:
    root = make_foreign_run(tmp_path / "foreign")
    rows = pq.read_table(export(root, "parquet")[0]).to_pylist()
    assert rows[0]["task_id"] == FOREIGN_ID
    assert rows[0]["novelty"] == 3  # a field this version does not know
    assert rows[0]["judge_calls"] == 2 and rows[0]["usage_cached_tokens"] == 0  # absent usage fields are 0
    rounds = pq.read_table(export(root, "parquet", table="rounds")[0]).to_pylist()
    assert [(r["round"], r["action"]) for r in rounds] == [(0, "continue"), (1, "stop")]


def test_bad_format_or_table_is_a_user_error(run_dir: Path) -> None:
    with pytest.raises(UserError, match=r"unknown --format 'xlsx' \(known: parquet, csv\)"):
        export(run_dir, "xlsx")
    with pytest.raises(UserError, match=r"unknown --table 'drafts' \(known: results, rounds\)"):
        export(run_dir, "csv", table="drafts")


def test_cli_export(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rounds.csv"
    main(["export", str(run_dir), "--format", "csv", "--table", "rounds", "--out", str(out)])
    # Decisions: pass-first 1, late 3, never 3, html 2, boom 1 (its error); the lost task has none.
    assert capsys.readouterr().out.strip() == f"{out} (10 rows)"
    assert len(out.read_text().splitlines()) == 1 + 10
    done = redraft("export", str(run_dir), "--format", "xlsx")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["redraft: error: unknown --format 'xlsx' (known: parquet, csv, otel)"]
