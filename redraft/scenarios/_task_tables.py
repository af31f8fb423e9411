"""Task files as tables: the rows of a CSV or Parquet file, streamed, each a dict of its cells by column.

- CSV: UTF-8 (a byte-order mark, as spreadsheets write one, is skipped), a header row, then one task
  per row; a cell may hold line breaks inside quotes. Every cell is text. A blank row is skipped; a row
  with more or fewer cells than the header is an error.
- Parquet: any file pyarrow reads (redraft's ``report`` extra), read a batch of rows at a time, only the
  columns the mapping names. Cells arrive typed: text, integers, floats, booleans, lists, structs.

Rows are numbered from 1 under the header, as ``row N`` in every message (a spreadsheet that numbers
its header 1 shows row N as N + 1); text that is not UTF-8 is named by its line of the file, since it is
decoded ahead of the rows.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from redraft.errors import UserError, missing_extra

Rows = Iterator[tuple[int, dict[str, Any]]]
"""(row number, the row's cells by column)."""
HeaderCheck = Callable[[list[str]], list[str]]
"""Given a table's header, the columns to read (`UserError` for a header the mapping cannot read)."""

MAX_CELL_CHARS = 8 * 1024 * 1024
"""A CSV cell, as a JSON line: past it, no task could carry it anyway (`MAX_TASK_BYTES`)."""
PARQUET_BATCH = 1024


def csv_rows(handle: BinaryIO, where: str, columns: HeaderCheck) -> Rows:
    """The rows of the CSV file open in ``handle``, its header checked first."""
    text = io.TextIOWrapper(handle, encoding="utf-8-sig", newline="")
    reader = csv.reader(text, strict=True)
    number = 0
    try:
        header = _next(reader)
        if header is None:
            raise UserError(f"{where}: no tasks (the file is empty); write a header row, then a task per row")
        columns(header)
        while (cells := _next(reader)) is not None:
            number += 1
            if not any(cells):
                continue
            if len(cells) != len(header):
                raise UserError(f"{where}, row {number}: {len(cells)} cells; the header has {len(header)}")
            yield number, dict(zip(header, cells, strict=True))
    except UnicodeDecodeError:  # text is decoded by the block, ahead of the rows: find its line
        raise UserError(f"{where}, line {_first_bad_line(handle)}: not UTF-8 text") from None
    except csv.Error as exc:
        raise UserError(f"{where}, row {number + 1}: not CSV: {exc}") from None
    finally:
        if not handle.closed:  # its opener may have closed it first, leaving these rows unread
            text.detach()  # the handle stays its opener's to close


def _next(reader: Iterator[list[str]]) -> list[str] | None:
    """The reader's next row, read under a task's cell limit, the process's own put back at once: the csv
    module's limit (128 KiB a cell) is one for the whole process, and other readers keep theirs."""
    kept = csv.field_size_limit(MAX_CELL_CHARS)
    try:
        return next(reader, None)
    finally:
        csv.field_size_limit(kept)


def _first_bad_line(handle: BinaryIO) -> int:
    """The number of the file's first line that is not UTF-8 (a row may span lines: a line is exact)."""
    handle.seek(0)
    for number, line in enumerate(handle, start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return number
    return 0


def parquet_rows(handle: BinaryIO, where: str, columns: HeaderCheck) -> Rows:
    """The rows of the Parquet file open in ``handle``, read by batches, only the columns ``columns`` asks for."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError:
        raise missing_extra("A Parquet task file", "report") from None
    try:
        table = pq.ParquetFile(handle)
    except (pa.ArrowException, OSError) as exc:
        raise UserError(f"{where}: not a Parquet file ({_first_line(exc)})") from None
    number = 0
    with table:  # closes what it read, not ``handle``: its opener's
        wanted = columns(list(table.schema_arrow.names))
        for batch in table.iter_batches(batch_size=PARQUET_BATCH, columns=wanted):
            for row in batch.to_pylist():
                number += 1
                yield number, row
    if number == 0:
        raise UserError(f"{where}: no tasks (the file has no rows)")


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
