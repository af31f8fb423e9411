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
with a row cap, so `check` returns within about `QUERY_TIMEOUT_S` and never
raises for bad text. Feedback never holds a value of the gold result.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from redraft.protocols.messages import CheckResult, Task
from redraft.scenarios.base import Scenario, scenario

QUERY_TIMEOUT_S = 1.0
"""Wall-clock limit of one query; every gold query takes a few milliseconds."""
ROW_CAP = 1000
"""A query returning more rows than this fails (no gold result is that large)."""
MAX_VALUE_BYTES = 1_000_000
"""The largest string or blob a query may make."""
PER_TEMPLATE = 4
"""Tasks per question template (10 templates: 40 tasks)."""

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_SQL_START = re.compile(r"^\s*(SELECT|WITH)\b", re.IGNORECASE | re.MULTILINE)
_ORDER_BY = re.compile(r"\border\s+by\b", re.IGNORECASE)
# sqlite3 authorizer action codes a SELECT needs; anything else (writes, PRAGMA, ATTACH) is denied.
_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_PROGRESS_EVERY = 10_000  # SQLite VM instructions between deadline checks
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def database_path() -> Path:
    """The shipped database file (package data)."""
    return Path(str(files("redraft.scenarios").joinpath("data", "shop.sqlite")))


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
    return db


class QueryError(Exception):
    """The candidate's query could not be run; the message is the feedback."""


@dataclass(frozen=True)
class QueryResult:
    rows: list[tuple[Any, ...]]
    columns: int


def run_query(sql: str, *, timeout_s: float = QUERY_TIMEOUT_S, row_cap: int = ROW_CAP) -> QueryResult:
    """Run one read-only statement; `QueryError` with a readable reason on any failure."""
    deadline = time.monotonic() + timeout_s
    db = _connect()
    try:
        db.set_authorizer(lambda action, *_: sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY)
        db.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_EVERY)
        try:
            cursor = db.execute(sql)
            rows = cursor.fetchmany(row_cap + 1)
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
        if len(rows) > row_cap:
            raise QueryError(f"the query returned more than {row_cap} rows; is a join or a filter missing?")
        columns = len(cursor.description or ())
        return QueryResult(rows=[tuple(row) for row in rows], columns=columns)
    finally:
        db.close()


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


# ------------------------------------------------------------------ question templates

Template = Callable[[random.Random, sqlite3.Connection], list[tuple[str, str]]]


def _values(db: sqlite3.Connection, sql: str) -> list[Any]:
    return [row[0] for row in db.execute(sql)]


def _by_city(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    cities = rng.sample(_values(db, "SELECT DISTINCT city FROM customers ORDER BY city"), PER_TEMPLATE)
    return [(f"How many customers live in {c}?", f"SELECT COUNT(*) FROM customers WHERE city = '{c}'") for c in cities]


def _joined_in(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    # Only (year, city) pairs with someone in them: an empty gold result would pass any empty query.
    picks = [
        tuple(row) for row in db.execute("SELECT DISTINCT substr(joined, 1, 4), city FROM customers ORDER BY 1, 2")
    ]
    return [
        (
            f"List the names of the customers from {c} who joined in {y}.",
            f"SELECT name FROM customers WHERE city = '{c}' AND joined LIKE '{y}-%'",
        )
        for y, c in rng.sample(sorted(picks), PER_TEMPLATE)
    ]


def _priciest(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    categories = rng.sample(_values(db, "SELECT DISTINCT category FROM products ORDER BY 1"), PER_TEMPLATE)
    return [
        (
            f"What is the name of the most expensive product in the '{c}' category?",
            f"SELECT name FROM products WHERE category = '{c}' ORDER BY price DESC LIMIT 1",
        )
        for c in categories
    ]


def _units_sold(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    products = rng.sample(
        _values(db, "SELECT DISTINCT p.name FROM products p JOIN order_items i ON i.product_id = p.id ORDER BY 1"),
        PER_TEMPLATE,
    )
    return [
        (
            f"How many units of the product '{p}' were sold in orders that were not cancelled?",
            "SELECT SUM(i.quantity) FROM order_items i JOIN orders o ON o.id = i.order_id "
            f"JOIN products p ON p.id = i.product_id WHERE p.name = '{p}' AND o.status != 'cancelled'",
        )
        for p in products
    ]


def _revenue_by_category(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    status_sets = rng.sample([("paid",), ("shipped",), ("cancelled",), ("paid", "shipped")], PER_TEMPLATE)
    return [
        (
            f"For each product category, what is the revenue (quantity times unit price) of the orders whose "
            f"status is {' or '.join(statuses)}? Give the category and the revenue, highest revenue first.",
            "SELECT p.category, ROUND(SUM(i.quantity * p.price), 2) AS revenue FROM order_items i "
            "JOIN orders o ON o.id = i.order_id JOIN products p ON p.id = i.product_id "
            f"WHERE o.status IN ({', '.join(repr(s) for s in statuses)}) GROUP BY p.category ORDER BY revenue DESC",
        )
        for statuses in status_sets
    ]


def _frequent_buyers(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    having_some = (
        "SELECT DISTINCT c.city FROM customers c JOIN orders o ON o.customer_id = c.id "
        "GROUP BY c.id HAVING COUNT(*) >= 3 ORDER BY 1"
    )
    cities = rng.sample(_values(db, having_some), PER_TEMPLATE)
    return [
        (
            f"Which customers from {c} placed at least 3 orders? List their names.",
            "SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id "
            f"WHERE c.city = '{c}' GROUP BY c.id HAVING COUNT(*) >= 3",
        )
        for c in cities
    ]


def _average_price(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    categories = rng.sample(_values(db, "SELECT DISTINCT category FROM products ORDER BY 1"), PER_TEMPLATE)
    return [
        (
            f"What is the average unit price of the products in the '{c}' category, rounded to 2 decimals?",
            f"SELECT ROUND(AVG(price), 2) FROM products WHERE category = '{c}'",
        )
        for c in categories
    ]


def _orders_in_month(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    months = rng.sample(_values(db, "SELECT DISTINCT substr(ordered, 1, 7) FROM orders ORDER BY 1"), PER_TEMPLATE)
    return [
        (
            f"How many orders were placed in {_MONTHS[int(m[5:]) - 1]} {m[:4]}?",
            f"SELECT COUNT(*) FROM orders WHERE ordered LIKE '{m}-%'",
        )
        for m in months
    ]


def _top_spenders(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    sizes = rng.sample([2, 3, 4, 5, 6, 7], PER_TEMPLATE)
    return [
        (
            f"Who are the {k} customers who spent the most on orders that were not cancelled? Give each name "
            "and the total spent (quantity times unit price), biggest spender first.",
            "SELECT c.name, ROUND(SUM(i.quantity * p.price), 2) AS spent FROM customers c "
            "JOIN orders o ON o.customer_id = c.id JOIN order_items i ON i.order_id = o.id "
            "JOIN products p ON p.id = i.product_id WHERE o.status != 'cancelled' "
            f"GROUP BY c.id ORDER BY spent DESC LIMIT {k}",
        )
        for k in sizes
    ]


def _category_buyers(rng: random.Random, db: sqlite3.Connection) -> list[tuple[str, str]]:
    categories = rng.sample(_values(db, "SELECT DISTINCT category FROM products ORDER BY 1"), PER_TEMPLATE)
    return [
        (
            f"How many different customers bought at least one product of the '{c}' category?",
            "SELECT COUNT(DISTINCT o.customer_id) FROM orders o JOIN order_items i ON i.order_id = o.id "
            f"JOIN products p ON p.id = i.product_id WHERE p.category = '{c}'",
        )
        for c in categories
    ]


TEMPLATES: list[tuple[Template, dict[str, Any]]] = [
    # each template with the shape its wording asks for: columns, and "desc_last" for "highest ... first"
    (_by_city, {"columns": 1}),
    (_joined_in, {"columns": 1}),
    (_priciest, {"columns": 1}),
    (_units_sold, {"columns": 1}),
    (_revenue_by_category, {"columns": 2, "order": "desc_last"}),
    (_frequent_buyers, {"columns": 1}),
    (_average_price, {"columns": 1}),
    (_orders_in_month, {"columns": 1}),
    (_top_spenders, {"columns": 2, "order": "desc_last"}),
    (_category_buyers, {"columns": 1}),
]


@scenario("sql")
class Sql(Scenario):
    """Questions about a small shop database; feedback from running the query, the gold result held out."""

    feedback_keys = frozenset({"columns", "order"})

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
