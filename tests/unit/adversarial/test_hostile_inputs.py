"""Hostile task files and flags: each is refused with one line and exit code 2, before anything starts.

Every case runs the real command (`redraft.cli.main`, in process) with Ray forbidden: the run must
stop at validation, write nothing at ``--out``, and say in one line what is wrong and where.
A task file's bad line sits between good ones: no task of the file may run, so none is lost
half-way; once the line is fixed, every task runs (on Ray: tests/integration/test_hostile_inputs_on_ray.py).
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from redraft.scenarios import get_scenario
from redraft.scenarios.taskfile import MAX_LINE_BYTES, MAX_STRING_CHARS, MAX_TASK_BYTES, validate_task_file
from tests.support.refusals import GOOD, SCRIPTED, refused


@pytest.fixture(autouse=True)
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case here must be refused before Ray: starting it is a failure of the test."""

    def refuse(address: object) -> None:
        raise AssertionError("Ray was started: the input got past validation")

    monkeypatch.setattr(importlib.import_module("redraft.actors.driver"), "ensure_ray", refuse)


# ---------------------------------------------------------------- hostile task files

# name -> (the bad line, what the one line must say about line 2)
HOSTILE_LINES: dict[str, tuple[Callable[[], str], str]] = {
    "json-nested-200k-deep": (
        lambda: '{"id": "x", "prompt": "p", "reference": {"a": ' + "[" * 200_000 + "]" * 200_000 + "}}",
        "line 2: nested deeper than 32 levels, the limit",
    ),
    "json-nested-33-deep": (
        lambda: '{"id": "x", "prompt": "p", "reference": {"a": ' + "[" * 31 + "]" * 31 + "}}",
        "line 2: reference.a" + "[0]" * 9 + "[0...]" + "[0]" * 12 + ": nested deeper than 32 levels, the limit",
    ),
    "int-5000-digits": (
        lambda: '{"id": "x", "prompt": "p", "reference": {"n": ' + "7" * 5000 + "}}",
        "line 2: reference.n: an integer of 5,000 digits; integers must be in [-9,223,372,036,854,775,808, "
        "18,446,744,073,709,551,615] (64 bits): write a larger one as a string",
    ),
    "int-2-to-the-64": (
        lambda: '{"id": "x", "prompt": "p", "reference": {"n": [1, 18446744073709551616]}}',
        "line 2: reference.n[1]: 18446744073709551616 does not fit in 64 bits",
    ),
    "lone-surrogate-in-prompt": (
        lambda: '{"id": "x", "prompt": "caf\\ud800e"}',
        r"line 2: prompt: holds a lone surrogate '\ud800' at character 3, which is not UTF-8 text",
    ),
    "lone-surrogate-in-id": (
        lambda: '{"id": "\\udfff", "prompt": "p"}',
        r"line 2: id: holds a lone surrogate '\udfff'",
    ),
    "lone-surrogate-in-a-key": (
        lambda: '{"id": "x", "prompt": "p", "reference": {"\\ud800": 1}}',
        r"line 2: reference, a key: holds a lone surrogate",
    ),
    "nan": (lambda: '{"id": "x", "prompt": "p", "reference": {"n": NaN}}', "line 2: reference.n: NaN is not a finite"),
    "infinity": (lambda: '{"id": "x", "prompt": "p", "reference": {"n": -Infinity}}', "-Infinity is not a finite"),
    "float-overflow": (lambda: '{"id": "x", "prompt": "p", "reference": {"n": 1e400}}', "1e400 is not a finite number"),
    "duplicate-key": (lambda: '{"id": "x", "prompt": "p", "id": "y"}', "line 2: the key 'id' appears twice"),
    "prompt-60-MB": (
        lambda: json.dumps({"id": "x", "prompt": "A" * 60_000_000}),
        f"line 2: longer than {MAX_LINE_BYTES:,} bytes (8 MiB), the limit of a line",
    ),
    "string-past-1-Mi": (
        lambda: json.dumps({"id": "x", "prompt": "A" * (MAX_STRING_CHARS + 1)}),
        "line 2: prompt: 1,048,577 characters; a string may hold at most 1,048,576",
    ),
    "task-past-2-MiB": (
        lambda: json.dumps({"id": "x", "prompt": "A" * MAX_STRING_CHARS, "reference": {"b": "B" * MAX_STRING_CHARS}}),
        f"bytes as a frame; a task may carry at most {MAX_TASK_BYTES:,} bytes (2 MiB): shorten the prompt",
    ),
    "id-300-chars": (lambda: json.dumps({"id": "i" * 300, "prompt": "p"}), "line 2: id: 300 characters; an id may"),
    "prompt-a-number": (lambda: '{"id": "x", "prompt": 1e400}', "line 2: 'prompt' must be a string, got a number"),
    "id-nan": (lambda: '{"id": NaN, "prompt": "p"}', "line 2: 'id' must be a string, got a number"),
    "fault-under-a-100k-key": (
        lambda: json.dumps({"id": "x", "prompt": "p", "reference": {"k" * 100_000: ["nan"]}}).replace('"nan"', "NaN"),
        "line 2: reference['kkkkkkkkkkkkkkkkkkkk'...][0]: NaN is not a finite number",
    ),
    "unknown-field-1-MB": (lambda: json.dumps({"id": "x", "prompt": "p", "k" * 1_000_000: 1}), "unknown field 'kkk"),
    "not-utf8": (lambda: '{"id": "caf\xe9", "prompt": "p"}', "line 2: not UTF-8 text"),
}


@pytest.mark.parametrize("name", list(HOSTILE_LINES))
def test_a_hostile_line_stops_the_whole_file_with_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, says = HOSTILE_LINES[name]
    tasks = tmp_path / "tasks.jsonl"
    line = make()
    encoding = "latin-1" if name == "not-utf8" else "utf-8"
    tasks.write_bytes(f"{GOOD % 1}\n".encode() + line.encode(encoding) + f"\n{GOOD % 3}\n".encode())
    out = tmp_path / "run"
    message = refused(["run", "arithmetic", "--tasks", str(tasks), *SCRIPTED, "--out", str(out)], capsys)
    assert message.startswith(f"redraft: error: task file {tasks}, line 2: ")
    assert says in message
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "tasks"),
    [
        (b"\xef\xbb\xbf" + (GOOD % 1).encode() + b"\r\n" + (GOOD % 2).encode() + b"\r\n", 2),  # BOM and CRLF
        (('{"id": "x", "prompt": "p", "reference": {"a": ' + "[" * 30 + "]" * 30 + "}}").encode(), 1),  # 32 deep
        (b'{"id": "x", "prompt": "p", "reference": {"n": [18446744073709551615, -9223372036854775808]}}', 1),
        (json.dumps({"id": "i" * 256, "prompt": "A" * MAX_STRING_CHARS}).encode(), 1),
    ],
    ids=["bom-crlf", "depth-32", "int-64-bit-bounds", "string-and-id-at-their-limits"],
)
def test_what_is_at_a_limit_is_accepted(content: bytes, tasks: int, tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(content)
    assert validate_task_file(path, get_scenario("arithmetic")) == tasks


def _blank(tmp_path: Path) -> str:
    (tmp_path / "blank.jsonl").write_text("\n \n")
    return str(tmp_path / "blank.jsonl")


def _fifo(tmp_path: Path) -> str:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return str(path)


@pytest.mark.parametrize(
    ("where", "says"),
    [
        (lambda tmp: str(tmp), "is a directory"),
        (lambda tmp: "/dev/null", "task file /dev/null is not a regular file (a pipe or a device?)"),
        (_fifo, "is not a regular file (a pipe or a device?): save the tasks to a file"),
        (lambda tmp: str(tmp / "nope.jsonl"), "task file not found"),
        (_blank, "no tasks (the file is empty)"),
    ],
    ids=["directory", "dev-null", "fifo", "missing", "blank"],
)
def test_a_task_file_that_is_no_file_of_tasks_is_refused(
    where: Callable[[Path], str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    message = refused(["run", "arithmetic", "--tasks", where(tmp_path), *SCRIPTED, "--out", str(out)], capsys)
    assert says in message and not out.exists()


# ---------------------------------------------------------------- hostile flags

HOSTILE_FLAGS: dict[str, tuple[list[str], str]] = {
    "max-tokens-1e23": (["--max-tokens", "1" + "0" * 23], "--max-tokens must be in [1, 1,000,000], got 100,000,"),
    "max-tokens-float": (["--max-tokens", "1e23"], "Invalid value for '--max-tokens'"),
    "budget-usd-nan": (["--budget-usd", "nan"], "--budget-usd must be a finite number, got nan"),
    "task-budget-usd-nan": (["--task-budget-usd", "nan"], "--task-budget-usd must be a finite number, got nan"),
    "budget-usd-negative": (["--budget-usd", "-1"], "--budget-usd must be in (0, 1,000,000,000], got -1"),
    "budget-seconds-inf": (["--budget-seconds", "inf"], "--budget-seconds must be a finite number, got inf"),
    "task-timeout-zero": (["--task-timeout", "0"], "--task-timeout must be in (0, 10,000,000], got 0"),
    "temperature-nan": (["--temperature", "nan"], "--temperature must be a finite number, got nan"),
    "threshold-negative": (["--threshold", "-0.5"], "--threshold must be in [0, 1], got -0.5"),
    "seed-past-63-bits": (["--seed", str(2**64)], "--seed must be in [0, 9,223,372,036,854,775,807]"),
    "samples-huge": (["--samples", "9" * 40], "--samples must be in [1, 1,000], got 1e+40"),
    "limit-zero": (["--limit", "0"], "--limit must be in [1, 1,000,000], got 0"),
    "rate-limit-zero": (
        ["--model", "scripted:tests.support.replies:always_seven?rpm=0"],
        "rate limit rpm must be in [1, 10,000,000]",
    ),
    "rate-limit-5000-digits": (
        ["--model", "scripted:tests.support.replies:always_seven?tpm=" + "9" * 5000],
        "rate limit tpm must be in [1, 1,000,000,000,000]",
    ),
    "rate-limit-without-value": (
        ["--model", "scripted:tests.support.replies:always_seven?rpm"],
        "is not a whole number",
    ),
    "prices-a-directory": (["--prices", "."], "cannot read price file .: Is a directory"),
}


@pytest.mark.parametrize("name", list(HOSTILE_FLAGS))
def test_a_hostile_flag_is_refused_with_the_flag_and_its_range(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    flags, says = HOSTILE_FLAGS[name]
    out = tmp_path / "run"
    model = [] if "--model" in flags else SCRIPTED
    message = refused(["run", "arithmetic", *model, *flags, "--out", str(out)], capsys)
    assert says in message and not out.exists()


def _negative_price(tmp: Path) -> str:
    (tmp / "prices.json").write_text('{"m": {"input": -1, "output": 1}}')
    return str(tmp / "prices.json")


def test_a_negative_price_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "arithmetic", *SCRIPTED, "--prices", _negative_price(tmp_path), "--out", str(tmp_path / "run")]
    assert "Expected `float` >= 0.0 - at `$[...].input`" in refused(argv, capsys)


def _a_file(tmp: Path) -> str:
    (tmp / "a-file").write_text("not a directory")
    return str(tmp / "a-file")


@pytest.mark.parametrize(
    ("out", "says"),
    [
        (_a_file, "is not a directory: give a run directory, or a path that does not exist yet"),
        (lambda tmp: "/dev/null", "--out /dev/null is not a directory"),
        (lambda tmp: "/proc/self", "--out /proc/self: cannot write in /proc/self"),
        (lambda tmp: _a_file(tmp) + "/run", "a-file is not a directory, so nothing can be made under it"),
        (lambda tmp: "/proc/self/run", "--out /proc/self/run: cannot write in /proc/self"),
    ],
    ids=["a-file", "dev-null", "proc-self", "under-a-file", "under-proc"],
)
def test_an_out_that_cannot_be_a_run_directory_is_refused_before_anything_starts(
    out: Callable[[Path], str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = out(tmp_path)
    before = sorted(tmp_path.iterdir())
    assert says in refused(["run", "arithmetic", *SCRIPTED, "--out", target], capsys)
    assert sorted(tmp_path.iterdir()) == before  # not even the write test's file is left


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["report", "{run}", "--max-pages", "-1"], "--max-pages must be at least 0, got -1"),
        (["report", "{run}", "--max-pages", "1e3"], "Invalid value for '--max-pages'"),
        (["report", "{run}", "--max-pages", "nan"], "Invalid value for '--max-pages'"),
        (["export", "{run}", "--format", "xlsx"], "xlsx"),
        (["export", "{run}", "--format", "csv", "--out", "{run}"], "is a directory: give the file to write"),
        (["export", "{run}", "--format", "csv", "--out", "/proc/self/x.csv"], "cannot export to /proc/self/x.csv"),
        (["export", "{run}", "--format", "csv", "--out", "{run}/results.jsonl/x.csv"], "is not a directory"),
        (["report", "/proc/self"], "is not a run directory"),
    ],
)
def test_the_other_commands_refuse_hostile_flags_too(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "results.jsonl").write_text("")
    assert says in refused([a.format(run=run_dir) for a in argv], capsys)
