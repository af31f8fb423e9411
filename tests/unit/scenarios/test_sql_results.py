"""A SQL check's query result is bounded in bytes: a query that makes large values fails the check with its
reason, and the verifier's own process never holds more than the cap and a row of it."""

from __future__ import annotations

import tracemalloc
from itertools import islice

import pytest

from redraft.scenarios import get_scenario
from redraft.scenarios.builtin.sql import MAX_COLUMNS, MAX_RESULT_BYTES, QueryError, run_query

SQL = get_scenario("sql")
TASK = next(islice(SQL.tasks(seed=0), 1))

# 400 rows of 100 kB each: 40 MB, ten times the cap, under the row cap and the value cap.
FLOOD = "SELECT randomblob(100000) FROM order_items LIMIT 400"


def reply(query: str) -> str:
    return f"```sql\n{query};\n```\n"


def test_a_result_past_the_byte_cap_fails_the_check_with_its_reason_and_is_never_held_whole() -> None:
    tracemalloc.start()
    try:
        checks = SQL.check(TASK, reply(FLOOD))
        grade = SQL.grade(TASK, reply(FLOOD))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not checks[0].passed and f"passed {MAX_RESULT_BYTES:,} bytes" in checks[0].detail
    assert grade is not None and not grade.passed and "bytes" in grade.detail
    assert peak < 2 * MAX_RESULT_BYTES  # the cap and a row, not the 40 MB the query makes


def test_the_byte_cap_is_counted_over_every_value_of_every_row() -> None:
    with pytest.raises(QueryError, match="passed 1,000 bytes at row 3"):
        run_query("SELECT 'x', printf('%.400c', 'y') FROM orders LIMIT 10", max_bytes=1000)
    assert len(run_query("SELECT 'x', printf('%.400c', 'y') FROM orders LIMIT 2", max_bytes=1000).rows) == 2


def test_a_row_of_more_columns_than_the_cap_is_refused() -> None:
    columns = ", ".join(f"randomblob(100) AS c{i}" for i in range(MAX_COLUMNS + 1))
    with pytest.raises(QueryError, match="too many columns"):
        run_query(f"SELECT {columns}")
