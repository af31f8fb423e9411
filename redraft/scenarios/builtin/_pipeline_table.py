"""A candidate's ``output.csv`` read once, strictly, and its cells typed by the contract: what the feedback
and the grade of a pipeline case both stand on.

The reading refuses (`UnreadableTable`) what is not a table: more than `MAX_OUTPUT_BYTES`, CSV that
breaks the quoting rules (``strict``), a field past the csv module's limit. It tolerates what honest
writers do: a UTF-8 byte-order mark, CRLF line ends, a quoted newline, blank lines (dropped); bytes that
are not UTF-8 become U+FFFD, which equals no gold cell. A cell is typed by a pattern before it is
converted, so ``nan``, ``inf``, ``1e3``, ``1_000``, ``1,234.50`` and a formula (``=1+1``) are no numbers,
a date is ISO YYYY-MM-DD or nothing, and text is one line of at most `MAX_TEXT_CHARS` (a formula in a
text column is text: it is never evaluated, and equals no gold cell).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from datetime import date

from redraft.scenarios.builtin._pipeline_data import Column

MAX_OUTPUT_BYTES = 2_000_000
"""The largest output read; the biggest right table is about 10 KB."""
MAX_TEXT_CHARS = 200
"""The longest text cell that is a value (a name is a few dozen characters; a page is no name)."""
FLOAT_ABSOLUTE = 0.01
"""Two amounts within this many euros are the same (a cent of rounding), or within `FLOAT_RELATIVE`."""
FLOAT_RELATIVE = 1e-6

Value = str | int | float | date
_INT = re.compile(r"[+-]?\d{1,12}")
_DECIMAL = re.compile(r"[+-]?\d{1,12}(?:\.\d{1,12})?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class UnreadableTable(Exception):
    """The output is no table the contract can be checked on; the message says why."""


@dataclass(frozen=True)
class Table:
    """The output's header and rows, cells as written (unstripped), blank rows dropped."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    utf8: bool
    """False when some bytes were not UTF-8 (each became U+FFFD)."""


def read_table(output: bytes) -> Table:
    """The table in ``output``; `UnreadableTable` when it is too large, empty or not CSV."""
    if len(output) > MAX_OUTPUT_BYTES:
        raise UnreadableTable(f"output.csv has {len(output)} bytes, more than the {MAX_OUTPUT_BYTES} read")
    try:
        text, utf8 = output.decode("utf-8-sig"), True
    except UnicodeDecodeError:
        text, utf8 = output.decode("utf-8-sig", errors="replace"), False
    try:
        rows = [tuple(row) for row in csv.reader(io.StringIO(text, newline=""), strict=True)]
    except csv.Error as exc:
        raise UnreadableTable(f"output.csv is not valid CSV: {exc}") from None
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if not rows:
        raise UnreadableTable("output.csv is empty: no header row")
    return Table(header=rows[0], rows=tuple(rows[1:]), utf8=utf8)


def parse_cell(column: Column, text: str) -> Value | None:
    """The typed value of a cell (surrounding spaces ignored), or None when it is no value of its type."""
    text = text.strip()
    if column.type == "str":
        return text if 0 < len(text) <= MAX_TEXT_CHARS and not _CONTROL.search(text) else None
    if column.type == "int":
        return int(text) if _INT.fullmatch(text) else None
    if column.type == "float":
        value = float(text) if _DECIMAL.fullmatch(text) else None
        return value if value is not None and math.isfinite(value) else None
    if not _DATE.fullmatch(text):
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:  # 2024-02-30
        return None


def cell_problem(column: Column, text: str) -> str | None:
    """Why a cell breaks its column's contract (its type, or its number of decimals), or None."""
    shown = repr(text[:40])
    if parse_cell(column, text) is None:
        wanted = {
            "str": f"non-empty text on one line, at most {MAX_TEXT_CHARS} characters",
            "int": "a whole number",
            "float": "a plain decimal number (digits and a point)",
            "date": "a date written YYYY-MM-DD",
        }[column.type]
        return f"{column.name} {shown} is not {wanted}"
    if column.decimals is not None and len(text.strip().partition(".")[2]) != column.decimals:
        return f"{column.name} {shown} is not written with {column.decimals} decimals"
    return None


def same_cell(column: Column, got: str, gold: str) -> bool:
    """Whether a written cell holds the gold cell's value: typed, a float within the tolerance."""
    mine, right = parse_cell(column, got), parse_cell(column, gold)
    if mine is None or right is None:
        return False
    if isinstance(mine, float) and isinstance(right, float):
        return abs(mine - right) <= FLOAT_ABSOLUTE + 1e-9 or abs(mine - right) <= FLOAT_RELATIVE * abs(right)
    return mine == right


def column_index(header: tuple[str, ...], columns: tuple[Column, ...]) -> tuple[dict[str, int], list[str]]:
    """Where each contract column is in ``header`` (names compared without surrounding spaces), and why the
    ones that are not found are not: missing, or named twice (which of the two would count is unclear)."""
    names = [name.strip() for name in header]
    found: dict[str, int] = {}
    problems = []
    for column in columns:
        count = names.count(column.name)
        if count == 1:
            found[column.name] = names.index(column.name)
        else:
            problems.append(f"column {column.name} is {'missing' if count == 0 else f'named {count} times'}")
    return found, problems


def cell(row: tuple[str, ...], at: int) -> str:
    """The row's cell at ``at``; a short row's missing cells are empty."""
    return row[at] if at < len(row) else ""
