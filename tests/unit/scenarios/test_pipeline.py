"""The pipeline scenario: programs run in the real sandbox over a task's files; feedback from the contract,
the grade against the gold, which neither the prompt nor the sandbox holds."""

from __future__ import annotations

import json
from itertools import islice

import pytest

from redraft.protocols.messages import Task, decode_as, encode
from redraft.scenarios import get_scenario
from redraft.scenarios.builtin._pipeline_data import make_case
from redraft.scenarios.builtin.pipeline import Pipeline, script_of
from tests.support.paths import REPO_ROOT

REFERENCE = (REPO_ROOT / "tests" / "support" / "pipeline_reference.py").read_text()
# As a candidate's program: it reads the working directory, where the sandbox put the task's files (and itself).
SOLVED = "```python\n" + REFERENCE.replace('p.name != "output.csv"', 'p.name not in ("output.csv", "main.py")') + "```"
NAIVE = SOLVED.replace("solve(inputs)", "naive(inputs)")


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return list(islice(get_scenario("pipeline").tasks(seed=3), 4))  # one of each difficulty


def test_tasks_are_frames_whose_feedback_half_holds_the_files_and_contract_and_no_gold_row(tasks: list[Task]) -> None:
    assert [t.task_id for t in tasks] == ["pipeline-000", "pipeline-001", "pipeline-002", "pipeline-003"]
    again = list(islice(get_scenario("pipeline").tasks(seed=3), 4))
    assert again == tasks and next(get_scenario("pipeline").tasks(seed=4)) != tasks[0]
    for task in tasks:
        assert decode_as(encode(task), Task) == task
        assert set(task.reference) == {"files", "contract"} and set(task.gold) == {"seed", "difficulty"}
        case = make_case(task.gold["seed"], task.gold["difficulty"])
        seen = json.dumps(task.without_gold().reference) + task.prompt
        published = {row[0] for row in case.examples}
        assert published and all(key in seen for key in published)
        # No other gold row is in what the loop sees, nor in the files (their ids are written messily).
        assert not [row for row in case.gold_rows if row[0] not in published and ",".join(row) in seen]


def test_the_reference_program_passes_every_check_and_grades_one(tasks: list[Task]) -> None:
    scenario = Pipeline()
    for task in tasks:
        checks = scenario.check(task, SOLVED)
        assert checks[0].name == "runs" and all(c.passed for c in checks), [c for c in checks if not c.passed]
        grade = scenario.grade(task, SOLVED)
        assert grade is not None and grade.passed and grade.score == 1.0, grade


def test_a_naive_program_runs_and_earns_part_of_the_grade_with_its_quirks_unhandled(tasks: list[Task]) -> None:
    scenario = Pipeline()
    hard = tasks[3]
    checks = {c.name: c for c in scenario.check(hard, NAIVE)}
    assert checks["runs"].passed
    grade = scenario.grade(hard, NAIVE)
    assert grade is not None and not grade.passed and 0 < grade.score < 1
    assert "unhandled" in grade.detail or "quirk" in grade.detail


def test_programs_that_write_nothing_loop_or_flood_fail_their_checks_and_score_nothing(tasks: list[Task]) -> None:
    scenario = Pipeline()
    task = tasks[0]
    replies = {
        "no program": "I would read the files and write the table.",
        "writes nothing": "```python\nprint('done')\n```",
        "loops": "```python\nwhile True:\n    pass\n```",
        "floods": "```python\nopen('output.csv', 'w').write('x' * 3_000_000)\n```",
        "raises": "```python\nraise ValueError('bad date')\n```",
    }
    for name, reply in replies.items():
        checks = scenario.check(task, reply)
        assert not all(c.passed for c in checks), name
        grade = scenario.grade(task, reply)
        assert grade is not None and grade.score == 0.0 and not grade.passed, name
    runs = {name: scenario.check(task, reply)[0] for name, reply in replies.items()}
    assert "no program found" in runs["no program"].detail
    assert runs["loops"].detail.startswith("timeout")
    assert "ValueError: bad date" in runs["raises"].detail
    assert "over the limit" in scenario.check(task, replies["floods"])[1].detail


def test_a_program_that_hunts_for_the_gold_finds_nothing(tasks: list[Task]) -> None:
    """It may try redraft's generator, the grader's modules, the parent directories: all out of reach."""
    hunter = """```python
import os, sys
found = []
for name in ("redraft", "redraft.scenarios.builtin._pipeline_data", "msgspec"):
    try:
        __import__(name)
        found.append(name)
    except ImportError:
        pass
for root in ("/", os.path.expanduser("~"), "..", "/tmp"):
    try:
        for entry in os.listdir(root):
            if "gold" in entry or entry in ("redraft", "site-packages", "tests"):
                found.append(os.path.join(root, entry))
    except OSError:
        pass
print("FOUND", found, file=sys.stderr)
raise SystemExit(1)
```"""
    checks = Pipeline().check(tasks[0], hunter)
    runs = checks[0]
    assert not runs.passed and "FOUND []" in runs.detail, runs.detail


def test_the_program_is_the_last_python_block() -> None:
    reply = "First:\n```python\nprint(1)\n```\nbetter:\n```python\nprint(2)\n```\nand usage:\n```bash\npython x\n```"
    assert script_of(reply) == "print(2)\n"
    assert script_of("```\nprint(3)\n```") == "print(3)\n"
    assert script_of("import csv\nprint(4)") == "import csv\nprint(4)"
    assert script_of("I would read the files first.") == ""
