"""A pipeline case's final contract checks (feedback) and its held-out table grade.

`contract_checks` is what the loop may see: it reads the candidate's ``output.csv`` and the `Contract`
(columns, types, key, order, the row bound, the published example rows) and nothing else of the case;
its details quote the candidate's own cells and the examples, never another gold value.

`grade_table` is the grade, held out: the output's rows aligned with the gold rows by key, each value
cell compared typed (a float within a cent, or one part in a million), credited cell by cell. The
score is the right value cells of the gold rows over the value cells of max(gold rows, output rows),
so an extra row costs as much as a missing one; a key written twice earns its row nothing (several
guesses at one row are no answer); the key column itself earns nothing (a list of ids is no table).
The example rows are left out of the score (they were in the prompt: copying them is no work), but a
table passes only with them right, every gold cell right, nothing extra and the rows in order. A
quirk is handled when every gold cell it touched is right and no key that missing it makes is written.

Invariant: neither function raises for any bytes; an output that is no table scores 0 with the reason.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field

from redraft.protocols.messages import CheckResult
from redraft.scenarios.builtin._pipeline_data import TYPE_WORDS, Column, Contract, PipelineCase, Quirk, Row
from redraft.scenarios.builtin._pipeline_table import (
    Table,
    UnreadableTable,
    Value,
    cell,
    cell_problem,
    column_index,
    parse_cell,
    read_table,
    same_cell,
)

__all__ = ["TableGrade", "contract_checks", "grade_table"]

_SHOWN = 3
"""Problems a check's detail names before it only counts the rest."""


def contract_checks(output: bytes, contract: Contract) -> list[CheckResult]:
    """The final contract's checks of ``output`` (the bytes of ``output.csv``): feedback, no gold but the examples."""
    try:
        table = read_table(output)
    except UnreadableTable as exc:
        return [_check("table", 0.0, str(exc))]
    index, missing = column_index(table.header, contract.columns)
    checks = [_encoding(table), _header(table, contract, missing)]
    checks += [_column(table, column, index.get(column.name)) for column in contract.columns]
    checks += [_key(table, contract, index), _order(table, contract, index), _row_count(table, contract)]
    checks.append(_examples(table, contract, index))
    return checks


def _check(name: str, score: float, detail: str) -> CheckResult:
    return CheckResult(name=name, passed=score >= 1.0, score=max(0.0, min(1.0, score)), detail=detail[:500])


def _listed(problems: list[str]) -> str:
    more = len(problems) - _SHOWN
    return "; ".join(problems[:_SHOWN]) + (f"; and {more} more" if more > 0 else "")


def _encoding(table: Table) -> CheckResult:
    if table.utf8:
        return _check("encoding", 1.0, "UTF-8")
    return _check("encoding", 0.0, "output.csv is not valid UTF-8: write it with encoding='utf-8'")


def _header(table: Table, contract: Contract, missing: list[str]) -> CheckResult:
    if table.header == contract.names:
        return _check("header", 1.0, "the header names the contract's columns in order")
    wanted = ",".join(contract.names)
    problems = [*missing, f"the header is {','.join(table.header)[:120]!r}, the contract's is {wanted!r}"]
    return _check("header", 0.0, _listed(problems))


def _column(table: Table, column: Column, at: int | None) -> CheckResult:
    name = f"column:{column.name}"
    if at is None:
        return _check(name, 0.0, f"column {column.name} is not (once) in the header")
    problems = [
        f"row {n}: {problem}"
        for n, row in enumerate(table.rows, 1)
        if (problem := cell_problem(column, cell(row, at))) is not None
    ]
    if not problems:
        return _check(name, 1.0, f"every {column.name} cell is of its type ({TYPE_WORDS[column.type]})")
    return _check(name, 1.0 - len(problems) / len(table.rows), _listed(problems))


def _key(table: Table, contract: Contract, index: dict[str, int]) -> CheckResult:
    if contract.key not in index or not table.rows:
        return _check("key", 0.0, f"no rows with a {contract.key} column to check")
    keys = [cell(row, index[contract.key]).strip() for row in table.rows]
    counts: dict[str, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    problems = [f"{counts['']} row(s) with an empty {contract.key}"] if "" in counts else []
    problems += [f"{key[:40]!r} appears {n} times" for key, n in counts.items() if key and n > 1]
    good = sum(1 for key in keys if key and counts[key] == 1)
    if not problems:
        return _check("key", 1.0, f"{contract.key} is unique and non-empty in every row")
    return _check("key", good / len(keys), _listed(problems))


def _order(table: Table, contract: Contract, index: dict[str, int]) -> CheckResult:
    columns = {c.name: c for c in contract.columns}
    if any(name not in index for name in contract.order) or len(table.rows) < 2:
        return _check("order", 0.0, f"cannot check the order by {', '.join(contract.order)}: a column or rows missing")
    places: list[tuple[Value, ...] | None] = []
    for row in table.rows:
        values = [parse_cell(columns[name], cell(row, index[name])) for name in contract.order]
        places.append(None if None in values else tuple(v for v in values if v is not None))
    pairs = [(n, a, b) for n, (a, b) in enumerate(itertools.pairwise(places), 1) if a is not None and b is not None]
    wrong = [n for n, a, b in pairs if a > b]  # one type per position: the same columns
    if not pairs:
        return _check("order", 0.0, "cannot check the order: no two neighbouring rows have readable sort cells")
    if not wrong:
        return _check("order", 1.0, f"sorted by {', '.join(contract.order)}")
    shown = ", ".join(f"row {n} before row {n + 1}" for n in wrong[:_SHOWN])
    detail = f"not sorted by {', '.join(contract.order)} ascending: {shown}" + (" ..." if len(wrong) > _SHOWN else "")
    return _check("order", 1.0 - len(wrong) / len(pairs), detail)


def _row_count(table: Table, contract: Contract) -> CheckResult:
    n = len(table.rows)
    if 1 <= n <= contract.max_rows:
        return _check("row_count", 1.0, f"{n} rows")
    detail = f"{n} rows, but the input files hold {contract.max_rows} order records"
    return _check("row_count", 0.0, "no rows under the header" if n == 0 else detail)


def _examples(table: Table, contract: Contract, index: dict[str, int]) -> CheckResult:
    """Each published example row is in the output once, every cell equal to the example's."""
    problems = []
    for example in contract.examples:
        key = example[contract.names.index(contract.key)]
        found = [row for row in table.rows if contract.key in index and cell(row, index[contract.key]).strip() == key]
        if len(found) != 1:
            problems.append(f"the example row {key} appears {len(found)} times, not once")
            continue
        wrong = _differences(found[0], example, contract, index)
        if wrong:
            problems.append(f"the example row {key} differs: " + ", ".join(wrong))
    good = len(contract.examples) - len(problems)
    if not problems:
        return _check("examples", 1.0, f"the {len(contract.examples)} example rows are there, as published")
    return _check("examples", good / max(1, len(contract.examples)), _listed(problems))


def _differences(row: tuple[str, ...], example: Row, contract: Contract, index: dict[str, int]) -> list[str]:
    """The cells of ``row`` that are not the example's (a column the header lacks among them)."""
    wrong = []
    for column, gold in zip(contract.columns, example, strict=True):
        mine = cell(row, index[column.name]) if column.name in index else None
        if mine is None or not same_cell(column, mine, gold):
            shown = "(no such column)" if mine is None else repr(mine[:40])
            wrong.append(f"{column.name} {shown} (the example has {gold!r})")
    return wrong


@dataclass(frozen=True, kw_only=True)
class TableGrade:
    """The held-out grade of one output table."""

    score: float
    """In [0, 1]: right value cells of the scored gold rows over the value cells of max(gold, output) rows."""
    passed: bool
    """Every gold cell right (examples included), no row extra or twice, the rows in the contract's order."""
    detail: str
    quirks_handled: dict[Quirk, bool] = field(default_factory=dict)
    """Per injected quirk: every gold cell it touched is right, and no key that missing it makes is written."""
    cells_right: int = 0
    cells_scored: int = 0
    rows_missing: int = 0
    """Scored gold rows whose key is not in the output."""
    rows_extra: int = 0
    """Output rows whose key is no gold key, and each further row of a key written more than once."""
    keys_duplicated: int = 0
    """Gold keys written more than once (their rows earn nothing)."""
    in_order: bool = False

    def as_check(self) -> CheckResult:
        """The grade as a `CheckResult`, for `Scenario.grade`."""
        return CheckResult(name="table", passed=self.passed, score=self.score, detail=self.detail[:500])


def grade_table(output: bytes, case: PipelineCase) -> TableGrade:
    """The held-out grade of ``output`` (the bytes of ``output.csv``) against ``case``'s gold table."""
    contract = case.contract
    try:
        table = read_table(output)
    except UnreadableTable as exc:
        return _zero(case, str(exc))
    index, problems = column_index(table.header, contract.columns)
    if contract.key not in index:
        return _zero(case, _listed(problems))
    by_key: dict[str, list[tuple[str, ...]]] = {}
    for row in table.rows:
        by_key.setdefault(cell(row, index[contract.key]).strip(), []).append(row)
    at_key = contract.names.index(contract.key)
    published = {example[at_key] for example in contract.examples}
    right = _right_cells(case, by_key, index)
    scored = [row for row in case.gold_rows if row[at_key] not in published]
    values = [c for c in contract.columns if c.name != contract.key]
    written = sum(len(rows) - (key in published) for key, rows in by_key.items())
    cells_scored = len(values) * max(len(scored), written, 1)
    cells_right = sum(1 for key, _ in right if key not in published)
    gold_keys = {row[at_key] for row in case.gold_rows}
    extra = sum(len(rows) if key not in gold_keys else len(rows) - 1 for key, rows in by_key.items())
    handled = {
        quirk: all(c in right or c[0] in published for c in footprint.cells)
        and not footprint.decoy_keys & by_key.keys()
        for quirk, footprint in case.footprints.items()
    }
    in_order = _in_gold_order(table, case, index[contract.key])
    complete = len(right) == len(values) * len(case.gold_rows)
    grade = TableGrade(
        score=cells_right / cells_scored,
        passed=complete and extra == 0 and in_order,
        detail="",
        quirks_handled=handled,
        cells_right=cells_right,
        cells_scored=cells_scored,
        rows_missing=sum(1 for row in scored if row[at_key] not in by_key),
        rows_extra=extra,
        keys_duplicated=sum(1 for key in gold_keys if len(by_key.get(key, ())) > 1),
        in_order=in_order,
    )
    return _described(grade, len(scored), len(published), problems)


def _right_cells(
    case: PipelineCase, by_key: dict[str, list[tuple[str, ...]]], index: dict[str, int]
) -> set[tuple[str, str]]:
    """(key, column) of every gold value cell the output holds right; a key written twice holds none."""
    contract = case.contract
    at_key = contract.names.index(contract.key)
    right = set()
    for gold in case.gold_rows:
        found = by_key.get(gold[at_key], [])
        if len(found) != 1:
            continue
        for at, column in enumerate(contract.columns):
            scored = column.name != contract.key and column.name in index
            if scored and same_cell(column, cell(found[0], index[column.name]), gold[at]):
                right.add((gold[at_key], column.name))
    return right


def _in_gold_order(table: Table, case: PipelineCase, key_at: int) -> bool:
    """Whether the output's rows with gold keys come in the gold table's order."""
    at_key = case.contract.names.index(case.contract.key)
    rank = {row[at_key]: n for n, row in enumerate(case.gold_rows)}
    ranks = [rank[key] for row in table.rows if (key := cell(row, key_at).strip()) in rank]
    return all(a < b for a, b in itertools.pairwise(ranks))


def _described(grade: TableGrade, scored: int, published: int, problems: list[str]) -> TableGrade:
    unhandled = [quirk for quirk, ok in grade.quirks_handled.items() if not ok]
    parts = [
        f"{grade.cells_right}/{grade.cells_scored} value cells right over {scored} gold rows "
        f"({published} published example rows left out)",
        f"{grade.rows_missing} missing, {grade.rows_extra} extra, {grade.keys_duplicated} keys written twice",
        "in order" if grade.in_order else "out of order",
        f"quirks unhandled: {', '.join(unhandled)}" if unhandled else "every quirk handled",
        *problems,
    ]
    return dataclasses.replace(grade, detail="; ".join(parts))


def _zero(case: PipelineCase, reason: str) -> TableGrade:
    return TableGrade(score=0.0, passed=False, detail=reason[:500], quirks_handled=dict.fromkeys(case.quirks, False))
