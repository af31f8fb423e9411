"""The results table is written in the two passes over ``results.jsonl`` that every task's latest record takes,
its columns found in the first: at a million tasks, each pass is seconds. Before, the columns took two more."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from redraft.rundir import _results
from redraft.views.export import export
from tests.unit.rundir.test_compact_trace import write


def test_the_results_table_reads_the_records_twice_and_has_every_row_and_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, range(30)).finish(1.0)
    passes = []
    real = _results.read_results

    def counted(root: Path) -> object:
        passes.append(root)
        return real(root)

    monkeypatch.setattr(_results, "read_results", counted)
    path, rows = export(tmp_path, "parquet")
    assert len(passes) == 2
    table = pq.read_table(path)
    assert rows == table.num_rows == 30
    assert table.column("task_id").to_pylist() == [f"t{i}" for i in range(30)]
    assert table.column("usage_input_tokens").to_pylist() == [10 + i for i in range(30)]
    assert table.column("retried_for").to_pylist() == [""] * 30
