"""One step of a plan run for real in the sandbox: its contract checked on the file it wrote, and a profile
of that file that shows value patterns (two date formats in one column) before any check names them."""

from __future__ import annotations

from redraft.protocols.messages import PlanStep, StepContract, StepRun
from redraft.sandbox import SandboxLimits
from redraft.scenarios._steps import contract_checks, pattern_of, read_rows, run_step

LIMITS = SandboxLimits(timeout_s=10.0, cpu_s=5, memory_mb=256, max_collect_bytes=100_000)
CONTRACT = StepContract(columns=["id", "day"], types={"day": "date", "id": "int"}, min_rows=1, max_rows=10)
STEP = PlanStep(number=2, intent="copy", inputs=["in.csv"], output="out.csv", contract=CONTRACT)
COPY = "```python\nimport shutil\nshutil.copy('in.csv', 'out.csv')\n```"


def test_value_patterns_name_date_styles_separators_and_shapes() -> None:
    cells = ["2024-03-05", "05.03.2024", "05/03/2024", "20240305", "1,234.50", "ORD-00042", "", "Zoë Ångström"]
    assert [pattern_of(c) for c in cells] == [
        "YYYY-MM-DD",
        "DD.MM.YYYY",
        "DD/MM/YYYY",
        "YYYYMMDD",
        "9,999.99",
        "aaa-9…9",
        "empty",
        "aaa a…a",
    ]


def test_a_step_that_writes_its_file_is_checked_and_profiled_over_the_carried_files() -> None:
    data = b"id,day\n1,2024-03-05\n2,05.03.2024\n3,2024-03-07\n"
    checks, seen = run_step({"task.txt": b"x"}, StepRun(step=STEP, files={"in.csv": data}), COPY, LIMITS)
    by_name = {c.name: c for c in checks}
    assert by_name["runs"].passed and by_name["columns"].passed and by_name["type:id"].passed
    assert not by_name["type:day"].passed
    assert "1 of 3 day cells are not date: '05.03.2024'" in by_name["type:day"].detail
    assert by_name["rows"].passed
    assert seen.written and seen.rows == 3 and seen.files == {"out.csv": data} and "shutil.copy" in seen.program
    day = next(c for c in seen.columns if c.name == "day")
    assert day.patterns == {"YYYY-MM-DD": 2, "DD.MM.YYYY": 1} and day.type == "date" and day.distinct == 3
    assert seen.sample[0] == ["1", "2024-03-05"]


def test_a_step_that_fails_loops_or_writes_nothing_says_so_and_carries_no_file() -> None:
    run = StepRun(step=STEP, files={"in.csv": b"id,day\n"})
    crashed, seen = run_step({}, run, "```python\nraise ValueError('bad dates')\n```", LIMITS)
    assert not crashed[0].passed and "ValueError: bad dates" in crashed[0].detail and "bad dates" in seen.stderr_tail
    assert not seen.written and seen.files == {} and [c.name for c in crashed] == ["runs", "output"]
    looping = SandboxLimits(timeout_s=2.0, cpu_s=1, memory_mb=256)
    stuck, seen = run_step({}, run, "```python\nwhile True: pass\n```", looping)
    assert not stuck[0].passed and seen.killed and seen.returncode != 0
    nothing, seen = run_step({}, run, "Sorry, I cannot help with that.", LIMITS)
    assert [c.name for c in nothing] == ["runs"] and "no program found" in nothing[0].detail


def test_the_contract_checks_columns_in_order_and_the_row_bound() -> None:
    header, rows = read_rows(b"day,id\n2024-01-01,1\n")
    checks = {c.name: c for c in contract_checks(header, rows, CONTRACT)}
    assert not checks["columns"].passed and "expected in the order ['id', 'day']" in checks["columns"].detail
    header, rows = read_rows(b"id,day\n" + b"1,2024-01-01\n" * 11)
    assert not {c.name: c for c in contract_checks(header, rows, CONTRACT)}["rows"].passed
    assert read_rows(b"") == ([], [])
    header, rows = read_rows(b'\xff\xfe "broken\n')  # bytes that are not UTF-8, an open quote: read, not raised
    assert header[0].startswith("\ufffd") and rows == []


def test_a_file_the_sandbox_refuses_or_inputs_over_its_cap_fail_the_step_not_the_task() -> None:
    for output in ("main.py", "out put.csv"):
        bad = PlanStep(number=1, intent="write", output=output)
        checks, seen = run_step({}, StepRun(step=bad), COPY, LIMITS)
        assert [(c.name, c.passed) for c in checks] == [("runs", False)] and "cannot run" in checks[0].detail
        assert not seen.written
    small = SandboxLimits(timeout_s=10.0, cpu_s=5, memory_mb=256, max_input_bytes=1_000)
    checks, _ = run_step({"big.csv": b"x" * 2_000}, StepRun(step=STEP), COPY, small)
    assert not checks[0].passed and "over max_input_bytes" in checks[0].detail
