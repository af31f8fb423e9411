"""Text-to-SQL against a small SQLite shop database shipped with the package.

The database (``data/shop.sqlite``: customers, products, orders, order items;
a few hundred rows) is made by ``scripts/make_sql_db.py`` from a fixed seed.
Questions come from templates filled with values drawn from the data by the
run seed; each has a gold query (held out, ``gold``), and its wording fixes the
shape of the answer (``reference``: how many columns, and an order when it asks
for one, "highest first").

Feedback (`check`) is what a user with the database has: the query runs (no
error, no timeout, within the row cap), returns rows, has the number of columns
the question asks for, and is sorted as the question asks. The grade (`grade`)
runs the gold query and compares result sets: column names are ignored, row
order too unless the gold query has ORDER BY, floats compared to 2 decimals.

Invariants: candidate SQL runs read-only (a ``mode=ro`` connection, ``PRAGMA
query_only``, and an authorizer that allows reading and nothing else), on a
deadline (a progress handler aborts a runaway query, e.g. a cartesian join) and
with a row cap and a byte cap (its rows fetched one at a time, stopped at `MAX_RESULT_BYTES`), so `check`
returns within about `QUERY_TIMEOUT_S`, holds little memory and never raises for bad text. Feedback never
holds a value of the gold result.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import random
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from redraft.protocols.messages import CheckResult, Task
from redraft.scenarios import Scenario, scenario
from redraft.scenarios.builtin._sql_questions import PER_TEMPLATE, TEMPLATES

QUERY_TIMEOUT_S = 1.0
"""Wall-clock limit of one query; every gold query takes a few milliseconds."""
ROW_CAP = 1000
"""A query returning more rows than this fails (no gold result is that large)."""
MAX_VALUE_BYTES = 1_000_000
"""The largest string or blob a query may make."""
MAX_COLUMNS = 64
"""The most columns a query's rows may have (SQLite's default, 2000, would let one row be 2 GB)."""
MAX_RESULT_BYTES = 4_000_000
"""The largest result a query may return, all rows together, as its values' sizes add up (no gold result
is near it): fetched a row at a time, so the verifier holds at most this and one row."""

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_SQL_START = re.compile(r"^\s*(SELECT|WITH)\b", re.IGNORECASE | re.MULTILINE)
_ORDER_BY = re.compile(r"\border\s+by\b", re.IGNORECASE)
# sqlite3 authorizer action codes a SELECT needs; anything else (writes, PRAGMA, ATTACH) is denied.
_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_PROGRESS_EVERY = 10_000  # SQLite VM instructions between deadline checks


def database_path() -> Path:
    """The shipped database file (package data)."""
    return Path(str(files("redraft.scenarios.builtin").joinpath("data", "shop.sqlite")))


@functools.cache
def schema_text() -> str:
    """The tables' CREATE statements, as shown to the model."""
    with contextlib.closing(_connect()) as db:
        rows = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY rowid").fetchall()
    return ";\n".join(str(sql) for (sql,) in rows) + ";"


def _connect() -> sqlite3.Connection:
    # immutable=1: package data never changes, so SQLite needs no lock or journal files beside it.
    db = sqlite3.connect(database_path().as_uri() + "?mode=ro&immutable=1", uri=True, check_same_thread=False)
    db.execute("PRAGMA query_only = ON")
    # A value of a gigabyte (SELECT randomblob(1e9)) would exhaust the verifier's memory.
    db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    db.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, MAX_COLUMNS)
    return db


class QueryError(Exception):
    """The candidate's query could not be run; the message is the feedback."""


@dataclass(frozen=True)
class QueryResult:
    rows: list[tuple[Any, ...]]
    columns: int


def run_query(
    sql: str, *, timeout_s: float = QUERY_TIMEOUT_S, row_cap: int = ROW_CAP, max_bytes: int = MAX_RESULT_BYTES
) -> QueryResult:
    """Run one read-only statement; `QueryError` with a readable reason on any failure, a result of more than
    ``row_cap`` rows or ``max_bytes`` bytes among them."""
    deadline = time.monotonic() + timeout_s
    db = _connect()
    try:
        db.set_authorizer(lambda action, *_: sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY)
        db.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_EVERY)
        try:
            cursor = db.execute(sql)
            rows = _fetched(cursor, row_cap, max_bytes)
        except sqlite3.ProgrammingError as exc:  # e.g. several statements at once
            raise QueryError(f"{str(exc).rstrip('.')}; send exactly one SELECT statement") from None
        except sqlite3.DatabaseError as exc:
            if time.monotonic() > deadline or "interrupted" in str(exc):
                raise QueryError(
                    f"the query was stopped after {timeout_s:g} s; a join without a join condition "
                    "(a cartesian product) is the usual cause"
                ) from None
            if "not authorized" in str(exc):
                raise QueryError(f"{exc}: only a read-only SELECT query is allowed") from None
            raise QueryError(str(exc)) from None
        columns = len(cursor.description or ())
        return QueryResult(rows=rows, columns=columns)
    finally:
        db.close()


def _fetched(cursor: sqlite3.Cursor, row_cap: int, max_bytes: int) -> list[tuple[Any, ...]]:
    """The cursor's rows, one at a time; `QueryError` as soon as they pass ``row_cap`` rows or ``max_bytes``."""
    rows: list[tuple[Any, ...]] = []
    size = 0
    while (row := cursor.fetchone()) is not None:
        size += sum(len(v) if isinstance(v, str | bytes) else 8 for v in row)
        if size > max_bytes:
            raise QueryError(
                f"the query's result passed {max_bytes:,} bytes at row {len(rows) + 1}; "
                "select the columns the question asks for, not large values"
            )
        rows.append(tuple(row))
        if len(rows) > row_cap:
            raise QueryError(f"the query returned more than {row_cap} rows; is a join or a filter missing?")
    return rows


def extract_sql(text: str) -> str:
    """The query in a reply: the last ```sql block (else the last fenced block), else the text from its
    first SELECT/WITH; surrounding whitespace and one trailing semicolon removed."""
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    if blocks:
        tagged = [body for tag, body in blocks if tag in {"sql", "sqlite"}]
        sql: str = (tagged or [body for _, body in blocks])[-1]
    else:
        start = _SQL_START.search(text)
        sql = text[start.start() :] if start else text
    return sql.strip().removesuffix(";").strip()


def _normalise(value: Any) -> Any:
    if isinstance(value, float):
        value = round(value, 2)
        return int(value) if value.is_integer() else value
    return value


def compare(got: QueryResult, expected: QueryResult, *, ordered: bool) -> str | None:
    """Why ``got`` is not ``expected`` (without revealing expected values), or None when they match."""
    if got.columns != expected.columns:
        return f"returned {got.columns} column(s), expected {expected.columns}"
    if len(got.rows) != len(expected.rows):
        return f"returned {len(got.rows)} row(s), expected {len(expected.rows)}"
    mine = [tuple(_normalise(v) for v in row) for row in got.rows]
    gold = [tuple(_normalise(v) for v in row) for row in expected.rows]
    if ordered and mine == gold:
        return None
    missing = sum((Counter(gold) - Counter(mine)).values())
    if missing == 0:
        return None if not ordered else "returned the right rows in the wrong order; sort them as the question asks"
    return f"returned the right number of rows ({len(mine)}), but {missing} of them are not in the expected result"


@functools.cache
def _gold(sql: str) -> QueryResult:
    return run_query(sql, timeout_s=10 * QUERY_TIMEOUT_S)


@scenario("sql")
class Sql(Scenario):
    """Questions about a small shop database; feedback from running the query, the gold result held out."""

    feedback_keys = frozenset({"columns", "order"})
    draft_tokens = 200  # a query

    def tasks(self, *, seed: int) -> Iterator[Task]:
        rng = random.Random(seed)
        with contextlib.closing(_connect()) as db:
            questions = [template(rng, db) for template, _ in TEMPLATES]
        # Interleave the templates, so the first N tasks cover every kind of question.
        for i in range(PER_TEMPLATE * len(TEMPLATES)):
            question, gold = questions[i % len(TEMPLATES)][i // len(TEMPLATES)]
            shape = TEMPLATES[i % len(TEMPLATES)][1]
            prompt = f"The SQLite database has these tables:\n\n{schema_text()}\n\nQuestion: {question}"
            yield Task(
                task_id=f"sql-{i:03d}", scenario=self.name, prompt=prompt, reference=shape, gold={"gold_sql": gold}
            )

    def system_prompt(self) -> str:
        return (
            "You write SQLite queries. Answer the question with exactly one SELECT statement over the given "
            "tables, in a single ```sql fenced block. No explanation is needed."
        )

    def answer(self, text: str) -> str | None:
        sql = " ".join(extract_sql(text).split())
        return sql or None

    def check(self, task: Task, text: str) -> list[CheckResult]:
        sql = extract_sql(text)
        if not sql:
            return [_fail("runs", "no query found; answer with one SELECT statement in a ```sql block")]
        try:
            got = run_query(sql)
        except QueryError as exc:
            return [_fail("runs", f"the query failed: {exc}"[:500])]
        checks = [CheckResult(name="runs", passed=True, score=1.0, detail=f"{len(got.rows)} row(s)")]
        checks.append(
            CheckResult(name="rows", passed=True, score=1.0, detail="the query returns rows")
            if got.rows
            else _fail("rows", "the query returns no rows; check its filters and joins against the question")
        )
        wanted = task.reference.get("columns")
        if isinstance(wanted, int):
            checks.append(
                CheckResult(name="columns", passed=True, score=1.0, detail=f"{wanted} column(s), as asked")
                if got.columns == wanted
                else _fail("columns", f"returned {got.columns} column(s); the question asks for {wanted}")
            )
        if task.reference.get("order") == "desc_last" and got.rows:
            checks.append(_sorted_descending(got))
        return checks

    def grade(self, task: Task, text: str) -> CheckResult | None:
        if "gold_sql" not in task.gold:
            return None
        gold_sql = str(task.gold["gold_sql"])
        sql = extract_sql(text)
        if not sql:
            return _fail("result_set", "no query found")
        try:
            got = run_query(sql)
        except QueryError as exc:
            return _fail("result_set", f"the query failed: {exc}"[:500])
        mismatch = compare(got, _gold(gold_sql), ordered=_ORDER_BY.search(gold_sql) is not None)
        if mismatch is not None:
            return _fail("result_set", mismatch)
        return CheckResult(
            name="result_set", passed=True, score=1.0, detail=f"the result matches ({len(got.rows)} rows)"
        )


def _sorted_descending(got: QueryResult) -> CheckResult:
    """Whether the rows go from the highest last column to the lowest, as "highest ... first" asks."""
    try:
        last = [row[-1] for row in got.rows]
        ordered = all(a >= b for a, b in itertools.pairwise(last))
    except TypeError:  # values that do not compare (NULL beside numbers)
        ordered = False
    if ordered:
        return CheckResult(name="order", passed=True, score=1.0, detail="sorted highest first, as asked")
    return _fail("order", "the rows are not sorted by the last column, highest first, as the question asks")


def _fail(name: str, detail: str) -> CheckResult:
    return CheckResult(name=name, passed=False, score=0.0, detail=detail)
