"""Task files as tables: the same tasks from JSON lines, CSV and Parquet, ``--columns``, and one-line faults."""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from redraft import RunConfig
from redraft.cli import main
from redraft.engine.resolution import resolve_run
from redraft.errors import UserError
from redraft.scenarios import get_scenario
from redraft.scenarios.taskfile import file_format, iter_tasks, validate_task_file
from tests.support.task_files import CHECK, write_lines

GRADED = f"check:{CHECK},grade:{CHECK}"
"""A check and a held-out grade: a record's reference becomes the task's gold, its feedback the check's data."""

RECORDS: list[dict[str, Any]] = [
    {
        "id": "apples",
        "prompt": "Mia has 3 apples and gets 4 more. How many now?",
        "reference": {"answer": 7, "unit": "apples"},
        "feedback": {"max_words": 3},
    },
    {
        "id": "capital-fr",
        "prompt": 'What is the capital of France?\nAnswer in one word, "quoted".',
        "reference": {"answer": "Paris", "aliases": ["paris", "PARIS"]},
    },
    {"id": "agent", "prompt": "Which agent is it?", "reference": {"answer": "007"}},
]
"""Numbers and text in one key, a list, a key some tasks lack, a prompt with a line break and quotes."""

MAPPING = (
    "id=qid,prompt=question,reference.answer=answer:json,reference.unit=unit,"
    "reference.aliases=aliases:json,feedback.max_words=max_words:int"
)


def write_csv(path: Path, header: list[str], *rows: list[str]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def mapped_csv(path: Path) -> Path:
    """`RECORDS` under a data set's own column names; every cell text, numbers and lists as JSON."""
    rows = []
    for r in RECORDS:
        ref = r["reference"]
        aliases = json.dumps(ref["aliases"]) if "aliases" in ref else ""
        words = str(r.get("feedback", {}).get("max_words", ""))
        rows.append([r["id"], r["prompt"], json.dumps(ref["answer"]), ref.get("unit", ""), aliases, words])
    return write_csv(path, ["qid", "question", "answer", "unit", "aliases", "max_words"], *rows)


def mapped_parquet(path: Path) -> Path:
    """`RECORDS` typed: a list column, an integer column, nulls where a task lacks the key."""
    table = pa.table(
        {
            "qid": [r["id"] for r in RECORDS],
            "question": [r["prompt"] for r in RECORDS],
            "answer": [json.dumps(r["reference"]["answer"]) for r in RECORDS],  # mixed types: JSON text
            "unit": [r["reference"].get("unit") for r in RECORDS],
            "aliases": pa.array([r["reference"].get("aliases") for r in RECORDS], pa.list_(pa.string())),
            "max_words": pa.array([r.get("feedback", {}).get("max_words") for r in RECORDS], pa.int64()),
            "ignored": ["not read", "by the", "mapping"],
        }
    )
    pq.write_table(table, path)
    return path


def named_csv(path: Path) -> Path:
    """`RECORDS` with the fields' own names as columns, the objects as JSON text: no ``--columns`` needed."""
    rows = [[r["id"], r["prompt"], json.dumps(r["reference"]), json.dumps(r.get("feedback", {}))] for r in RECORDS]
    return write_csv(path, ["id", "prompt", "reference", "feedback"], *rows)


def test_the_same_tasks_as_json_lines_csv_and_parquet_are_equal_tasks(tmp_path: Path) -> None:
    jsonl = write_lines(tmp_path / "tasks.jsonl", *RECORDS)
    expected = list(iter_tasks(jsonl, get_scenario(GRADED)))
    assert expected[0].gold == {"answer": 7, "unit": "apples"} and expected[0].reference == {"max_words": 3}
    for path, columns in [
        (mapped_csv(tmp_path / "tasks.csv"), MAPPING),
        (mapped_parquet(tmp_path / "tasks.parquet"), MAPPING),
        (named_csv(tmp_path / "named.csv"), None),
    ]:
        assert validate_task_file(path, get_scenario(GRADED), columns) == len(RECORDS)
        assert list(iter_tasks(path, get_scenario(GRADED), columns)) == expected, path.name
    renamed = [{"qid": r["id"], "question": r["prompt"], "reference": r["reference"]} for r in RECORDS]
    renamed_file = write_lines(tmp_path / "renamed.jsonl", *renamed)  # a key no entry names is not read
    same = list(iter_tasks(renamed_file, get_scenario(GRADED), "id=qid,prompt=question,reference=reference"))
    assert [(t.task_id, t.prompt, t.gold) for t in same] == [(t.task_id, t.prompt, t.gold) for t in expected]


def test_the_format_is_the_suffix() -> None:
    assert [file_format(p) for p in ("a.csv", "b.CSV", "c.parquet", "d.pq", "e.jsonl", "f.txt", "g")] == [
        "csv",
        "csv",
        "parquet",
        "parquet",
        "jsonl",
        "jsonl",
        "jsonl",
    ]


def test_text_cells_read_as_the_mapping_says(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "t.csv", ["n", "q", "a", "f", "j"], ["12", "What?", " 42 ", "0.5", '{"k": [1, true, null]}']
    )
    columns = "id=n,prompt=q,reference.int=a:int,reference.text=a,reference.float=f:float,reference.json=j:json"
    [task] = iter_tasks(path, get_scenario(f"check:{CHECK}"), columns)
    assert task.task_id == "12"  # a text cell is text, digits or not
    assert task.reference == {"int": 42, "text": " 42 ", "float": 0.5, "json": {"k": [1, True, None]}}


def test_a_typed_parquet_cell_keeps_its_type_and_an_integer_id_is_read_as_text_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"qid": [101, 102], "q": ["a?", "b?"], "gold": [1.5, 2.0], "ok": [True, False]}), path)
    columns = "id=qid:str,prompt=q,reference.gold=gold,reference.ok=ok"
    tasks = list(iter_tasks(path, get_scenario(f"check:{CHECK}"), columns))
    assert [(t.task_id, t.reference) for t in tasks] == [
        ("101", {"gold": 1.5, "ok": True}),
        ("102", {"gold": 2.0, "ok": False}),
    ]
    with pytest.raises(UserError) as info:
        validate_task_file(path, get_scenario(f"check:{CHECK}"), "id=qid,prompt=q")
    assert str(info.value) == (
        f"task file {path}, row 1, column 'qid': the id must be text, got a number; "
        "read it as text with --columns id=qid:str"
    )


def _parquet(path: Path, **columns: Any) -> Path:
    pq.write_table(pa.table({"id": ["a", "b"], "prompt": ["x?", "y?"], **columns}), path)
    return path


@pytest.mark.parametrize(
    ("make", "columns", "message"),
    [
        (
            lambda p: write_csv(p / "t.csv", ["id", "q", "answer"], ["a", "x?", "1"]),
            "prompt=question",
            "{path}: no column 'question' (the prompt; map it with --columns prompt=...); its columns: id, q, answer",
        ),
        (
            lambda p: write_csv(p / "t.csv", ["id", "question"], ["a", "x?"]),
            None,
            "{path}: the column 'question' is not a task field (fields: id, prompt, reference, feedback, "
            "reference.KEY, feedback.KEY); name the file's columns with --columns, e.g. "
            "--columns id=COLUMN,prompt=COLUMN",
        ),
        (
            lambda p: write_csv(p / "t.csv", ["id", "prompt"], ["a", "x?"], ["b", "y?", "extra"]),
            None,
            "{path}, row 2: 3 cells; the header has 2",
        ),
        (
            lambda p: write_csv(p / "t.csv", ["id", "prompt", "g"], ["a", "x?", "7"], ["b", "y?", "seven"]),
            "reference.g=g:int",
            "{path}, row 2, column 'g': 'seven' is not an integer",
        ),
        (
            lambda p: write_csv(p / "t.csv", ["id", "prompt", "g"], ["a", "x?", "7"], ["b", "y?", "[1,"]),
            "reference.g=g:json",
            "{path}, row 2, column 'g': not valid JSON: Expecting value (column 4)",
        ),
        (
            lambda p: write_csv(p / "t.csv", ["id", "prompt"], ["a", "x?"], ["", ""], ["a", "z?"]),
            None,
            "{path}, row 3: duplicate id 'a' (first on row 1)",
        ),
        (
            lambda p: write_csv(p / "t.csv", ["id", "question"], ["a", "x?"], ["b", ""]),
            "prompt=question",
            "{path}, row 2: missing field 'prompt' ('question' is empty or absent)",
        ),
        (
            lambda p: write_csv(p / "t.csv", ["id", "prompt", "id"], ["a", "x?", "b"]),
            None,
            "{path}: the column 'id' appears twice in the header",
        ),
        (
            lambda p: write_csv(p / "t.csv", ["id", "prompt"]),
            None,
            "{path}: no tasks (the file has a header and no rows)",
        ),
        (
            lambda p: write_csv(p / "t.csv", ["id", "prompt", "reference"], ["a", "x?", "[1]"]),
            None,
            "{path}, row 1, column 'reference': 'reference' must be an object, got an array",
        ),
        (
            lambda p: _parquet(p / "t.parquet", g=[1.0, math.nan]),
            "reference.g=g",
            "{path}, row 2, column 'g': reference.g: nan is not a finite number (JSON has no NaN or Infinity)",
        ),
        (
            lambda p: _parquet(p / "t.parquet", when=[datetime.datetime(2026, 1, 1), None]),
            "reference.when=when",
            "{path}, row 1, column 'when': reference.when: a value of type datetime, which JSON has not: "
            "store it as text",
        ),
        (lambda p: _parquet(p / "t.parquet"), "prompt=nope", "{path}: no column 'nope' (the prompt; map it with"),
        (
            lambda p: (p / "t.parquet").write_bytes(b"id,prompt\na,b\n") and p / "t.parquet",
            None,
            "{path}: not a Parquet file (",
        ),
        (
            lambda p: (p / "t.csv").write_bytes(b"id,prompt\na,caf\xe9\n") and p / "t.csv",
            None,
            "{path}, line 2: not UTF-8 text",
        ),
        (
            lambda p: (p / "t.csv").write_bytes(b"id,pr\xe9mpt\na,b\n") and p / "t.csv",
            None,
            "{path}, line 1: not UTF-8 text",
        ),
        (
            lambda p: write_lines(p / "t.jsonl", {"qid": "a", "question": "x?"}),
            "id=qid,prompt=question,reference.answer=answr",
            "{path}: --columns reads the key 'answr', which no line has",
        ),
    ],
)
def test_a_fault_is_one_line_naming_the_file_the_row_and_the_column(
    tmp_path: Path, make: Any, columns: str | None, message: str
) -> None:
    path = make(tmp_path)
    with pytest.raises(UserError) as info:
        validate_task_file(path, get_scenario(f"check:{CHECK}"), columns)
    said = str(info.value)
    assert said.startswith(message.format(path=f"task file {path}")), said
    assert "\n" not in said


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ("prompt", "--columns: 'prompt' is not FIELD=COLUMN (e.g. prompt=question)"),
        (
            "promt=question",
            "--columns: unknown field 'promt' (did you mean 'prompt'? fields: id, prompt, reference, feedback, "
            "reference.KEY, feedback.KEY)",
        ),
        (
            "reference.answer=gold:integer",
            "--columns: unknown type 'integer' in 'reference.answer=gold:integer' (did you mean 'int'? "
            "types: str, int, float, json)",
        ),
        ("prompt=q,prompt=r", "--columns maps 'prompt' twice: give it one column"),
        (" , ", "--columns is empty: give FIELD=COLUMN pairs, e.g. --columns id=qid,prompt=question"),
    ],
)
def test_a_bad_mapping_is_refused_before_the_file_is_read(tmp_path: Path, columns: str, message: str) -> None:
    path = write_csv(tmp_path / "t.csv", ["id", "prompt"], ["a", "x?"])
    with pytest.raises(UserError) as info:
        validate_task_file(path, get_scenario(f"check:{CHECK}"), columns)
    assert str(info.value) == message


def test_a_column_whose_name_ends_in_a_colon_and_a_word_is_named_with_its_type(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "t.csv", ["id", "q:text", "gold", "at 10:30"], ["a", "x?", "3", "early"])
    [task] = iter_tasks(
        path, get_scenario(f"check:{CHECK}"), "prompt=q:text:str,reference.n=gold:int,reference.t=at 10:30"
    )
    assert task.prompt == "x?" and task.reference == {"n": 3, "t": "early"}
    with pytest.raises(UserError, match=r"^--columns: unknown type 'text' in 'prompt=q:text' "):
        validate_task_file(path, get_scenario(f"check:{CHECK}"), "prompt=q:text")


def test_a_run_streams_the_mapped_tasks_and_columns_go_with_a_task_file(tmp_path: Path) -> None:
    path = mapped_csv(tmp_path / "tasks.csv")
    config = RunConfig.build(scenario=GRADED, tasks=str(path), columns=MAPPING, limit=2)
    from redraft.backends.scripted import ScriptedSpec

    unused = ScriptedSpec(script=[])
    run = resolve_run(config, backends={"drafter": unused, "critic": unused})
    assert [t.task_id for t in run.tasks()] == ["apples", "capital-fr"]
    with pytest.raises(UserError, match=r"^--columns maps the columns of a task file: give it with --tasks FILE$"):
        resolve_run(RunConfig.build(columns="prompt=q"), backends={"drafter": unused, "critic": unused})


def test_the_cli_refuses_a_bad_row_in_one_line_and_starts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_csv(tmp_path / "t.csv", ["qid", "question"], ["a", "x?"], ["b", ""])
    argv = ["run", "--tasks", str(path), "--columns", "id=qid,prompt=question", "--check", CHECK]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--out", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"redraft: error: task file {path}, row 2: missing field 'prompt' ('question' is empty or absent)"]
    assert not (tmp_path / "run").exists()


def test_a_csv_cell_past_the_csv_modules_limit_is_read_and_the_processs_limit_stays_as_it_was(tmp_path: Path) -> None:
    limit, big = csv.field_size_limit(), "x" * 200_000  # past the module's own 128 KiB, within a task's limit
    path = write_csv(tmp_path / "t.csv", ["id", "prompt"], ["a", big], ["b", "y?"])
    tasks = iter_tasks(path, get_scenario(f"check:{CHECK}"))
    assert next(tasks).prompt == big
    assert csv.field_size_limit() == limit  # while the file is being read, as after
    assert validate_task_file(path, get_scenario(f"check:{CHECK}")) == 2
    assert csv.field_size_limit() == limit
    with pytest.raises(csv.Error, match="field larger than field limit"):  # any other reader keeps its limit
        list(csv.reader(io.StringIO(f"a,{big}\n")))
