"""Pipeline cases (``redraft.scenarios.builtin._pipeline_data``) and their grading (``_pipeline_grade``).

The generator is checked against the bytes it writes (each declared quirk is there, each other one is
not, a hidden one only past the first 50 records), the grade against solutions of known worth: the
reference solution (tests/support/pipeline_reference.py) scores 1.0, the naive one and the reference
with one fix left out score less and name the quirk, and hostile outputs score 0 or partial credit
without an exception.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from redraft.scenarios.builtin._pipeline_data import QUIRKS, Contract, PipelineCase, make_case, prompt_text
from redraft.scenarios.builtin._pipeline_files import HIDDEN_AFTER, VALUE_COLUMNS, VISIBLE_WITHIN
from redraft.scenarios.builtin._pipeline_grade import contract_checks, grade_table
from redraft.scenarios.builtin._pipeline_table import MAX_OUTPUT_BYTES
from tests.support import pipeline_reference
from tests.support.pipeline_reference import naive, solve

SEEDS = range(20)
LEVELS = (1, 2, 3, 4)
ISO = re.compile(rb"\d{4}-\d{2}-\d{2}")
DATE_STYLES = {
    "iso": re.compile(r"\d{4}-\d{2}-\d{2}"),
    "dotted": re.compile(r"\d{2}\.\d{2}\.\d{4}"),
    "day_month_name": re.compile(r"\d{2} [A-Z][a-z]{2} \d{4}"),
    "compact": re.compile(r"\d{8}"),
}
THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+\.\d{2}")
XML_AMOUNT = re.compile(r"<amount ([^>]*)>")


def sniff(data: bytes) -> str:
    first = data.lstrip()[:1]
    return "xml" if first == b"<" else "json" if first in (b"[", b"{") else "csv"


def csv_rows(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode(), newline="")))


def web_records(case: PipelineCase) -> list[dict[str, object]]:
    data = case.files["orders_web.json"]
    return json.loads(data) if sniff(data) == "json" else list(csv_rows(data))


def quirk_records(case: PipelineCase) -> dict[str, list[int]]:
    """Per quirk, the indices of the records of its file where the bytes show it (empty: not there)."""
    dates = [row["order_date"] for row in csv_rows(case.files["orders.csv"])]
    amounts = [row["amount_eur"] for row in csv_rows(case.files["orders.csv"])]
    ids = [str(r["id"]).strip().upper() for r in web_records(case)]
    units = XML_AMOUNT.findall(case.files["orders_partner.xml"].decode())
    liars = [name for name, data in case.files.items() if sniff(data) != name.rsplit(".", 1)[1]]
    return {
        "csv_date_formats": [i for i, d in enumerate(dates) if not DATE_STYLES["iso"].fullmatch(d)],
        "thousands_separator": [i for i, a in enumerate(amounts) if THOUSANDS.fullmatch(a)],
        "json_near_duplicates": [i for i, order_id in enumerate(ids) if order_id in ids[:i]],
        "xml_mixed_units": [i for i, attrs in enumerate(units) if attrs != 'currency="EUR"'],
        "lying_extension": [0] if liars else [],
    }


# ---------------------------------------------------------------- the generator


def test_a_case_depends_only_on_its_seed_and_difficulty() -> None:
    first = make_case(3, 4)
    assert first == make_case(3, 4) and first.files == make_case(3, 4).files
    assert prompt_text(first) == prompt_text(make_case(3, 4))
    for other in (make_case(4, 4), make_case(3, 3)):
        assert all(other.files.get(name) != data for name, data in first.files.items())
    with pytest.raises(ValueError, match="difficulty must be one of"):
        make_case(0, 5)


@pytest.mark.parametrize("level", LEVELS)
def test_difficulty_scales_the_quirks_the_hidden_ones_and_the_rows(level: int) -> None:
    quirks, hidden, rows = {1: (1, 0, 26), 2: (2, 0, 60), 3: (3, 1, 120), 4: (5, 3, 190)}[level]
    for seed in SEEDS:
        case = make_case(seed, level)
        assert len(case.quirks) == quirks and len(case.hidden) == hidden and set(case.hidden) <= set(case.quirks)
        assert rows <= len(case.gold_rows) <= rows + 30
        assert sum(len(data) for data in case.files.values()) <= 64 * 1024
        assert len(case.files) == 4 and {"orders.csv", "orders_web.json", "orders_partner.xml"} <= set(case.files)
    assert {q for seed in SEEDS for q in make_case(seed, level).quirks} == set(QUIRKS) or level == 1


@pytest.mark.parametrize("level", LEVELS)
def test_each_declared_quirk_is_in_the_bytes_and_no_other_one(level: int) -> None:
    for seed in SEEDS:  # every seed: the quirks a case draws differ with it
        case = make_case(seed, level)
        found = quirk_records(case)
        assert {q for q, records in found.items() if records} == set(case.quirks)
        for quirk in case.quirks:
            if quirk in case.hidden:
                assert min(found[quirk]) >= HIDDEN_AFTER, f"{quirk} shows at record {min(found[quirk])}"
            else:
                assert min(found[quirk]) < VISIBLE_WITHIN, f"{quirk} first shows at record {min(found[quirk])}"


@pytest.mark.parametrize("level", LEVELS)
def test_the_quirks_are_what_they_claim(level: int) -> None:
    """Two or three date formats; a near-duplicate is not an exact one; a foreign currency has a stated rate."""
    for seed in SEEDS:  # every seed: the quirks a case draws differ with it
        case = make_case(seed, level)
        if "csv_date_formats" in case.quirks:
            dates = [row["order_date"] for row in csv_rows(case.files["orders.csv"])]
            styles = {name for d in dates for name, style in DATE_STYLES.items() if style.fullmatch(d)}
            assert len(styles) in (2, 3) and all(any(s.fullmatch(d) for s in DATE_STYLES.values()) for d in dates)
        if "json_near_duplicates" in case.quirks:
            records = [json.dumps(r, sort_keys=True) for r in web_records(case)]
            assert len(set(records)) == len(records)  # near, never exact, duplicates
        xml = case.files["orders_partner.xml"].decode()
        for currency in set(re.findall(r'currency="([A-Z]{3})"', xml)) - {"EUR"}:
            assert re.search(rf'<rate from="{currency}" to="EUR" value="\d\.\d{{4}}"/>', xml)
        if "xml_mixed_units" in case.quirks and "xml_mixed_units" in case.hidden:
            assert xml.index("<rates>") > xml.index("</orders>")  # the rates do not give the quirk away early


@pytest.mark.parametrize("level", LEVELS)
def test_footprints_name_gold_cells_of_the_injected_quirks_beyond_the_examples(level: int) -> None:
    for seed in SEEDS:  # every seed: the quirks a case draws differ with it
        case = make_case(seed, level)
        keys = {row[0] for row in case.gold_rows}
        published = {row[0] for row in case.examples}
        assert set(case.footprints) == set(case.quirks)
        assert 2 <= len(case.examples) <= 3 and set(case.examples) <= set(case.gold_rows)
        for quirk, footprint in case.footprints.items():
            assert footprint.cells and {k for k, _ in footprint.cells} <= keys
            assert {c for _, c in footprint.cells} <= set(VALUE_COLUMNS)
            assert {k for k, _ in footprint.cells} - published, f"{quirk} touches only example rows"
            assert not footprint.decoy_keys & keys
            if quirk != "lying_extension":
                assert not {k for k, _ in footprint.cells} & published, f"an example row shows how {quirk} is fixed"
        assert list(case.gold_rows) == sorted(case.gold_rows, key=lambda r: (r[2], r[0]))
        assert case.contract.max_rows >= len(case.gold_rows)


def test_a_case_travels_as_msgpack_and_its_contract_as_plain_data() -> None:
    """The scenario carries the contract in Task.reference (plain data) and may carry the case whole."""
    case = make_case(11, 4)
    assert msgspec.convert(msgspec.to_builtins(case.contract), Contract) == case.contract
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(case), type=PipelineCase) == case


@pytest.mark.parametrize("level", LEVELS)
def test_the_prompt_names_no_gold_row_but_the_examples_and_no_file_content(level: int) -> None:
    for seed in SEEDS:  # every seed: the quirks a case draws differ with it
        case = make_case(seed, level)
        prompt = prompt_text(case)
        published = {row[0] for row in case.examples}
        assert {row[0] for row in case.gold_rows if row[0] in prompt} == published
        assert all(",".join(row) in prompt for row in case.examples)  # no name holds a comma or a quote
        assert ",".join(case.contract.names) in prompt
        for name, data in case.files.items():
            assert f"{name} ({len(data)} bytes)" in prompt
            assert data.decode().splitlines()[0] not in prompt  # not even a header line
        assert not re.search(r"\bC\d{3}\b|<order|currency=|placed_at", prompt)


# ---------------------------------------------------------------- the grade, on solutions of known worth


@pytest.mark.parametrize("level", LEVELS)
def test_the_reference_solution_scores_one_and_meets_the_contract(level: int) -> None:
    for seed in SEEDS:  # every seed: the quirks a case draws differ with it
        case = make_case(seed, level)
        output = solve(case.files)
        grade = grade_table(output, case)
        assert grade.score == 1.0 and grade.passed and grade.in_order, grade.detail
        assert grade.quirks_handled == dict.fromkeys(case.quirks, True)
        assert [c for c in contract_checks(output, case.contract) if not c.passed] == []


def test_the_reference_solution_is_a_program_a_sandbox_can_run(tmp_path: Path) -> None:
    """Run by path in a directory holding the input files, it writes output.csv there (standard library only)."""
    case = make_case(5, 4)
    for name, data in case.files.items():
        (tmp_path / name).write_bytes(data)
    program = Path(pipeline_reference.__file__)
    subprocess.run([sys.executable, "-I", str(program)], cwd=tmp_path, check=True, timeout=60)
    assert (tmp_path / "output.csv").read_bytes() == solve(case.files)
    assert grade_table((tmp_path / "output.csv").read_bytes(), case).passed


@pytest.mark.parametrize("level", LEVELS)
def test_the_naive_solution_earns_partial_credit_and_handles_no_quirk(level: int) -> None:
    for seed in SEEDS:  # every seed: the quirks a case draws differ with it
        case = make_case(seed, level)
        grade = grade_table(naive(case.files), case)
        assert 0.0 < grade.score < 1.0 and not grade.passed, grade.detail
        assert grade.quirks_handled == dict.fromkeys(case.quirks, False)


@pytest.mark.parametrize(("seed", "level"), [(seed, level) for seed in range(8) for level in LEVELS])
def test_leaving_out_one_fix_marks_that_quirk_unhandled(seed: int, level: int) -> None:
    """Quirks that touch their own cells only (a date, an amount) leave every other quirk handled."""
    case = make_case(seed, level)
    for quirk in case.quirks:
        grade = grade_table(solve(case.files, skip=frozenset({quirk})), case)
        assert 0.0 < grade.score < 1.0 and not grade.quirks_handled[quirk], (quirk, grade.detail)
        if quirk in ("csv_date_formats", "thousands_separator", "xml_mixed_units"):
            assert [q for q, ok in grade.quirks_handled.items() if not ok] == [quirk]


def test_the_feedback_points_at_what_the_naive_solution_missed_from_its_own_cells() -> None:
    """The contract checks quote the candidate's output and the published examples, never another gold key."""

    def ids(case: PipelineCase) -> list[str]:
        return (
            [str(r["id"]).strip() for r in web_records(case)] if sniff(case.files["orders_web.json"]) == "json" else []
        )

    # a case whose JSON is JSON, with a near-duplicate under the very same id, and mixed CSV dates
    case = next(c for s in SEEDS if len(set(ids(c := make_case(s, 4)))) < len(ids(c)))
    output = naive(case.files)
    failed = {c.name: c.detail for c in contract_checks(output, case.contract) if not c.passed}
    assert "is not a date written YYYY-MM-DD" in failed["column:order_date"]
    assert "appears 2 times" in failed["key"]
    published = {row[0] for row in case.examples}
    shown = set(re.findall(r"ORD-\d{5}", " ".join(failed.values())))
    assert shown and shown <= set(re.findall(r"ORD-\d{5}", output.decode())) | published


# ---------------------------------------------------------------- hostile outputs

CASE = make_case(7, 4)
REFERENCE = solve(CASE.files)
HEADER = list(CASE.contract.names)
PUBLISHED = {row[0] for row in CASE.examples}
SCORED = len(CASE.gold_rows) - len(CASE.examples)
"""Gold rows the score counts; each has four value cells."""


def reference_rows() -> list[list[str]]:
    return [list(row) for row in csv.reader(io.StringIO(REFERENCE.decode(), newline=""))][1:]


def table(rows: list[list[str]], header: list[str] = HEADER, newline: str = "\n") -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator=newline).writerows([header, *rows])
    return out.getvalue().encode()


def graded(output: bytes) -> tuple[float, dict[str, bool]]:
    """The grade's score and which contract checks passed; both must take any bytes in their stride."""
    grade = grade_table(output, CASE)
    checks = contract_checks(output, CASE.contract)
    assert 0.0 <= grade.score <= 1.0 and all(0.0 <= c.score <= 1.0 for c in checks)
    assert not grade.passed or grade.score == 1.0
    return grade.score, {c.name: c.passed for c in checks}


def scored_row(predicate: Callable[[list[str]], bool] = lambda row: True) -> int:
    """The index in `reference_rows` of the first row that is no example and meets ``predicate``."""
    return next(i for i, row in enumerate(reference_rows()) if row[0] not in PUBLISHED and predicate(row))


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        (b"", "empty"),
        (b"\n\r\n\n", "empty"),
        (REFERENCE + b"x" * MAX_OUTPUT_BYTES, "more than"),
        (b'order_id,customer\n"ORD-10000"x,y\n', "not valid CSV"),
        (table([["ORD-10000", "x" * 200_000, "2024-01-01", "1.00", "1"]]), "not valid CSV"),
        (REFERENCE.decode().encode("utf-16"), "column order_id is missing"),
        (table([], header=[h.upper() for h in HEADER]), "column order_id is missing"),
        (table(reference_rows(), header=["order_id", *HEADER]), "column order_id is named 2 times"),
        (random.Random(0).randbytes(5000), ""),
    ],
    ids=[
        "empty",
        "blank_lines",
        "too_big",
        "bad_quoting",
        "field_past_limit",
        "utf16",
        "header_case",
        "key_twice",
        "noise",
    ],
)
def test_what_is_no_table_scores_zero_with_the_reason(output: bytes, reason: str) -> None:
    grade = grade_table(output, CASE)
    assert grade.score == 0.0 and not grade.passed and reason in grade.detail
    assert not any(grade.quirks_handled.values())
    assert not all(c.passed for c in contract_checks(output, CASE.contract))


def test_a_header_only_table_scores_zero() -> None:
    score, checks = graded(table([]))
    assert score == 0.0 and not checks["row_count"] and not checks["examples"]


def test_columns_are_found_by_name_and_a_column_named_twice_earns_nothing() -> None:
    rows = reference_rows()
    swapped = [[r[1], r[0], *r[2:]] for r in rows]
    assert graded(table(swapped, header=[HEADER[1], HEADER[0], *HEADER[2:]])) == (
        1.0,
        {**graded(REFERENCE)[1], "header": False},
    )
    score, checks = graded(table([[*r, "junk"] for r in rows], header=[*HEADER, "note"]))
    assert score == 1.0 and not checks["header"]
    score, checks = graded(table([[f" {c} " for c in r] for r in rows], header=[f" {h}" for h in HEADER]))
    assert score == 1.0 and not checks["header"]  # surrounding spaces: the values are right, the header is not exact
    score, _ = graded(table([[*r, "0.00"] for r in rows], header=[*HEADER, "amount_eur"]))
    assert score == 0.75  # which amount_eur counts is unclear: neither does


@pytest.mark.parametrize("bad", ["nan", "NaN", "inf", "-inf", "1e3", "1_000.00", "=1+1", "0x10", "1,000.00", ""])
def test_an_amount_that_is_no_plain_decimal_is_wrong(bad: str) -> None:
    rows = [[*r[:3], bad, r[4]] for r in reference_rows()]
    grade = grade_table(table(rows), CASE)
    assert grade.score == 0.75 and not grade.quirks_handled["xml_mixed_units"]
    assert not graded(table(rows))[1]["column:amount_eur"]


def test_a_formula_or_a_quoted_newline_costs_its_own_cell_only() -> None:
    for text in ['=HYPERLINK("http://example.org","x")', "First\nLast", "x" * 100_000, "Mia\x00"]:
        rows = reference_rows()
        rows[scored_row()][1] = text
        score, checks = graded(table(rows))
        assert score == pytest.approx(1 - 1 / (4 * SCORED)), text
        assert checks["key"] and checks["row_count"]  # the rows after it stayed aligned
        assert checks["column:customer"] == text.startswith("=")  # a formula is text, never evaluated


def test_honest_writers_habits_are_tolerated() -> None:
    """A byte-order mark and CRLF line ends are how Excel and csv.writer's default write CSV."""
    crlf = table(reference_rows(), newline="\r\n")
    for output in (b"\xef\xbb\xbf" + REFERENCE, crlf, b"\xef\xbb\xbf" + crlf, REFERENCE + b"\n\n"):
        score, checks = graded(output)
        assert score == 1.0 and all(checks.values()), checks
        assert grade_table(output, CASE).passed


def test_a_byte_that_is_not_utf8_costs_its_cell_only() -> None:
    rows = reference_rows()
    at = scored_row(lambda row: not row[1].isascii())
    name = rows[at][1]
    output = table(rows).replace(f",{name},".encode(), f",{name},".encode("latin-1"), 1)
    score, checks = graded(output)
    assert score == pytest.approx(1 - 1 / (4 * SCORED)) and not checks["encoding"]


def test_keys_written_twice_earn_their_rows_nothing() -> None:
    rows = reference_rows()
    guesses = [[*r[:3], f"{float(r[3]) + 1:.2f}", r[4]] for r in rows]
    grade = grade_table(table(rows + guesses), CASE)
    assert grade.score == 0.0 and grade.keys_duplicated == len(CASE.gold_rows) and grade.rows_extra == len(rows)
    at = scored_row()
    for copy in (rows[at], [f" {rows[at][0]} ", *rows[at][1:]]):
        score, checks = graded(table([*rows, copy]))
        assert score == pytest.approx((SCORED - 1) / (SCORED + 1)) and not checks["key"]


def test_extra_rows_cost_as_much_as_missing_ones_and_examples_earn_nothing() -> None:
    rows = reference_rows()
    invented = [[f"ORD-{i}", "Nobody", "2030-01-01", "1.00", "1"] for i in range(10)]
    assert graded(table(rows + invented))[0] == pytest.approx(SCORED / (SCORED + 10))
    kept = [r for r in rows if r[0] in PUBLISHED] + [r for r in rows if r[0] not in PUBLISHED][10:]
    grade = grade_table(table(kept), CASE)
    assert grade.score == pytest.approx((SCORED - 10) / SCORED) and grade.rows_missing == 10
    examples = [list(row) for row in CASE.examples]
    score, checks = graded(table(examples))
    assert score == 0.0 and checks["examples"] and checks["key"]
    assert graded(table(examples * 50))[0] == 0.0
    assert graded(table([[r[0].lower(), *r[1:]] for r in rows]))[0] == 0.0
    assert graded(table([[f"  {r[0]}\t", *r[1:]] for r in rows]))[0] == 1.0  # keys are compared stripped


def test_the_order_is_checked_and_required_to_pass_but_not_scored() -> None:
    grade = grade_table(table(reference_rows()[::-1]), CASE)
    assert grade.score == 1.0 and not grade.in_order and not grade.passed
    assert not graded(table(reference_rows()[::-1]))[1]["order"]


def test_cells_are_compared_typed_with_a_cent_of_tolerance() -> None:
    rows = reference_rows()
    assert graded(table([[*r[:3], f"{float(r[3]) + 0.01:.2f}", r[4]] for r in rows]))[0] == 1.0
    assert graded(table([[*r[:3], f"{float(r[3]) + 0.02:.2f}", r[4]] for r in rows]))[0] == 0.75
    score, checks = graded(table([[*r[:3], str(float(r[3])), f" {r[4]} "] for r in rows]))
    assert score == 1.0 and not checks["column:amount_eur"]  # 12.5 is 12.50, but the contract says two decimals
    assert graded(table([[*r[:4], f"{r[4]}.0"] for r in rows]))[0] == 0.75  # 3.0 is no whole number
    assert graded(table([[*r[:2], r[2].replace("-", "/"), *r[3:]] for r in rows]))[0] == 0.75


def test_no_mutation_of_a_right_output_makes_the_grade_or_the_checks_raise() -> None:
    rng = random.Random(1)
    pieces = [b'"', b",", b"\n", b"\r", b"\x00", b"\xff", b"\xef\xbb\xbf", b"nan", b'""', b"=", b"ORD-", b" "]
    for _ in range(300):
        data = bytearray(REFERENCE)
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(len(data))
            if rng.random() < 0.3:
                del data[at : at + rng.randint(1, 40)]
            else:
                data[at:at] = rng.choice(pieces) * rng.randint(1, 3)
        graded(bytes(data))
