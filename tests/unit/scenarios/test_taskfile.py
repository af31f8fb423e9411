"""Tasks and checks people bring: the task file format and the check contract."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy
import pytest

from redraft import RunConfig
from redraft.cli import main
from redraft.engine.resolution import resolve_run
from redraft.errors import CheckError, UserError
from redraft.protocols.messages import Task
from redraft.scenarios import get_scenario
from redraft.scenarios.taskfile import iter_tasks, task_file_identity, validate_task_file
from redraft.scenarios.user_check import UserCheck, to_check_result
from tests.support.paths import DOCS
from tests.support.resolved import identity
from tests.support.task_files import CHECK, GOOD, write_lines

# ---------------------------------------------------------------- the file format


def test_a_good_file_streams_its_tasks_in_order(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "tasks.jsonl", GOOD[0], "", "   ", GOOD[2])
    assert validate_task_file(path, get_scenario(f"check:{CHECK}")) == 2
    name = f"check:{CHECK}"  # a check with no separate grade: the reference is the check's data
    assert list(iter_tasks(path, get_scenario(name))) == [
        Task(task_id="right", scenario=name, prompt="What is 3 + 4?", reference={"answer": "7"}),
        Task(task_id="raises", scenario=name, prompt="What is 5 + 2?", reference={}),
    ]
    graded = f"check:{CHECK},grade:{CHECK}"  # with a grade, the reference is held out for it alone
    assert next(iter_tasks(path, get_scenario(graded))) == Task(
        task_id="right", scenario=graded, prompt="What is 3 + 4?", reference={}, gold={"answer": "7"}
    )
    assert next(iter_tasks(path, get_scenario("arithmetic"))).gold == {
        "answer": "7"
    }  # a built-in's gold, by its own rule


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([GOOD[0], '{"id": "b", "prompt": "x",}'], "line 2: not valid JSON: Expecting property name"),
        (["[1, 2]"], "line 1: expected a JSON object, got an array"),
        ([{"prompt": "x"}], "line 1: missing field 'id'"),
        ([{"id": "a"}], "line 1: missing field 'prompt'"),
        ([{"id": 3, "prompt": "x"}], "line 1: 'id' must be a string, got a number"),
        ([{"id": "a", "prompt": None}], "line 1: 'prompt' must be a string, got null"),
        ([{"id": "a", "prompt": "  "}], "line 1: 'prompt' is empty"),
        (
            [{"id": "a", "promt": "x"}],
            "line 1: unknown field 'promt' (did you mean 'prompt'? allowed: id, prompt, reference, feedback)",
        ),
        (
            [{"id": "a", "prompt": "x", "zzz": 1}],
            "line 1: unknown field 'zzz' (allowed: id, prompt, reference, feedback)",
        ),
        ([{"id": "a", "prompt": "x", "reference": "7"}], "line 1: 'reference' must be an object, got a string"),
        ([GOOD[0], "", GOOD[1], {**GOOD[1], "id": "right"}], "line 4: duplicate id 'right' (first on line 1)"),
        (["", "  "], ": no tasks (the file is empty)"),
    ],
)
def test_a_malformed_file_names_the_file_the_line_and_the_fault(
    tmp_path: Path, lines: list[object], message: str
) -> None:
    path = write_lines(tmp_path / "tasks.jsonl", *lines)
    with pytest.raises(UserError) as info:
        validate_task_file(path, get_scenario(f"check:{CHECK}"))
    assert str(info.value).startswith(f"task file {path}")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_unreadable_files_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"task file not found: .*nope\.jsonl"):
        validate_task_file(tmp_path / "nope.jsonl", get_scenario("arithmetic"))
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(json.dumps(GOOD[0]).encode() + b"\n" + b'{"id": "caf\xe9", "prompt": "x"}\n')
    with pytest.raises(UserError, match=r"latin.jsonl, line 2: not UTF-8 text"):
        validate_task_file(latin, get_scenario("arithmetic"))


def test_the_files_path_and_content_hash_enter_the_fingerprint(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "tasks.jsonl", *GOOD)
    config = RunConfig.build(scenario=f"check:{CHECK}", tasks=str(path))
    expected = {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    assert identity(config)["tasks"] == task_file_identity(path) == expected
    before = identity(config)
    write_lines(path, *GOOD[:2])
    assert identity(config) != before
    assert identity(RunConfig.build())["tasks"] is None


def test_a_builtin_scenario_can_check_a_task_file(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "mine.jsonl",
        {"id": "apples", "prompt": "Mia has 3 apples and gets 4 more. How many now?", "reference": {"answer": 7}},
        {"id": "pears", "prompt": "Tom has 9 pears and eats 2. How many now?", "reference": {"answer": 7}},
    )
    config = RunConfig.build(scenario="arithmetic", tasks=str(path), limit=1)
    run = resolve_run(config, backends={"drafter": _unused(), "critic": _unused()})
    loaded = list(run.tasks())
    assert [t.task_id for t in loaded] == ["apples"] and loaded[0].scenario == "arithmetic"
    assert loaded[0].gold == {"answer": 7} and loaded[0].reference == {}  # arithmetic holds its answer back
    verdict = get_scenario("arithmetic").grade(loaded[0], "Answer: 7")
    assert verdict is not None and verdict.passed


def _unused() -> Any:
    from redraft.backends.scripted import ScriptedSpec

    return ScriptedSpec(script=[])


def test_a_check_scenario_without_a_task_file_is_refused() -> None:
    with pytest.raises(UserError, match=r"has no tasks of its own: give --tasks FILE\.jsonl"):
        resolve_run(RunConfig.build(scenario=f"check:{CHECK}"))


# ---------------------------------------------------------------- the check contract


@pytest.mark.parametrize(
    ("returned", "passed", "score", "detail"),
    [
        ((1.0, "correct"), True, 1.0, "correct"),
        ([0.25, "one of four"], False, 0.25, "one of four"),
        ((1, "int one"), True, 1.0, "int one"),
        (True, True, 1.0, ""),
        (False, False, 0.0, ""),
        (0.5, False, 0.5, ""),
        ((True, "bool score"), True, 1.0, "bool score"),
        ((numpy.float64(0.75), "numpy"), False, 0.75, "numpy"),
        (numpy.bool_(True), True, 1.0, ""),
        ((Fraction(1, 4), "exact"), False, 0.25, "exact"),
    ],
)
def test_accepted_returns(returned: Any, passed: bool, score: float, detail: str) -> None:
    result = to_check_result("mine", returned)
    assert (result.name, result.passed, result.score, result.detail) == ("mine", passed, score, detail)


@pytest.mark.parametrize(
    "returned",
    [None, "yes", (1.5, "too good"), (-0.1, "neg"), math.nan, (0.5,), (0.5, 3), {"score": 1}, (0.5, "a", "b")],
)
def test_anything_else_is_the_checks_error_naming_the_contract(returned: Any) -> None:
    with pytest.raises(CheckError, match=r"the check mod:mine returned .*; it must return \(score, detail\)") as err:
        to_check_result("mine", returned, function="mod:mine")
    assert err.value.raised == "BrokenContract"


def test_a_check_that_raises_is_not_feedback_but_the_checks_error_with_its_traceback() -> None:
    """Before, the exception's text became a failed check's detail, fed to the drafter as feedback."""
    from redraft.engine.verifier import Verifier
    from redraft.protocols.messages import Draft, VerifyRequest

    scenario = UserCheck(CHECK)
    task = Task(task_id="t", scenario=scenario.name, prompt="p", reference={})
    with pytest.raises(KeyError):
        scenario.check(task, "Answer: 7")
    draft = Draft(task_id="t", round=0, sample=0, text="Answer: 7")
    with pytest.raises(CheckError) as err:
        asyncio.run(Verifier(scenario.name).verify(VerifyRequest(task=task, draft=draft)))
    assert str(err.value) == f"the check of check:{CHECK} raised KeyError: 'answer'"
    assert err.value.raised == "KeyError" and err.value.where.startswith("check_modules.py:")
    assert err.value.where.endswith(" in exact_answer")
    assert "check_modules.py" in err.value.trace and "/" not in err.value.trace  # base names: no machine path
    good = Task(task_id="t", scenario=scenario.name, prompt="p", reference={"answer": "7"})
    assert scenario.check(good, "Answer: 7")[0].passed
    assert scenario.system_prompt() == "Answer the question. End with a line 'Answer: <answer>'."
    assert get_scenario("check:tests.support.check_modules:share_of_keywords").check(
        Task(task_id="k", scenario="x", prompt="p", reference={"keywords": ["red", "blue"]}), "a red car"
    )[0].score == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_module_here:f", "cannot import check module 'no_such_module_here' (No module named"),
        ("tests.support.check_modules:nope", "check module 'tests.support.check_modules' has no function 'nope'"),
        ("tests.support.check_modules:SYSTEM_PROMPT", "has no function 'SYSTEM_PROMPT'"),
        ("just_a_name", "a check must be given as MODULE:FUNCTION"),
    ],
)
def test_a_bad_check_target_is_a_user_error(target: str, message: str) -> None:
    with pytest.raises(UserError) as info:
        get_scenario(f"check:{target}")
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import no_such_dependency_here\n", "failed to import: No module named 'no_such_dependency_here'"),
        ("def broken(:\n", "failed to import: SyntaxError: "),
        ("raise RuntimeError('no config file')\n", "failed to import: RuntimeError: no config file"),
    ],
)
def test_a_check_module_that_fails_to_import_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, message: str
) -> None:
    module = f"broken_check_{abs(hash(source))}"
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UserError) as info:
        get_scenario(f"check:{module}:score")
    assert str(info.value).startswith(f"check module '{module}' failed to import: ") and message in str(info.value)


# ---------------------------------------------------------------- from the CLI


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run"], "missing SCENARIO: name one (see `redraft scenarios`), or use --tasks FILE --check MOD:FN"),
        (["run", "--check", CHECK], "--check needs --tasks FILE.jsonl"),
        (["run", "arithmetic", "--tasks", "{good}", "--check", CHECK], "give a SCENARIO or --check, not both"),
        (["run", "--tasks", "{bad}", "--check", CHECK], "task file {bad}, line 2: missing field 'prompt'"),
        (["run", "--tasks", "{good}", "--check", "nope_mod:f"], "cannot import check module 'nope_mod'"),
        (["run", f"check:{CHECK}"], "has no tasks of its own"),
    ],
)
def test_cli_usage_errors_are_one_line_and_start_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    good = write_lines(tmp_path / "good.jsonl", *GOOD)
    bad = write_lines(tmp_path / "bad.jsonl", GOOD[0], {"id": "x"})
    argv = [a.format(good=good, bad=bad) for a in args] + ["--out", str(tmp_path / "run")]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("redraft: error: ")
    assert message.format(bad=bad) in err[0]
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- the documented examples keep their contract


def doc_block(page: str, after: str, lang: str) -> str:
    """The first ```lang block of the docs page ``page`` after the text ``after``."""
    rest = (DOCS / page).read_text().split(after, 1)[1]
    return rest.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def test_the_documented_check_module_keeps_the_contract() -> None:
    namespace: dict[str, Any] = {}
    exec(doc_block("scenarios/your-own.md", "An example, `my_checks.py`:", "python"), namespace)
    check = namespace["exact_answer"]
    assert check("It is Paris.\nAnswer: paris", {"answer": "Paris"}) == (1.0, "correct")
    assert check("Answer: Lyon", {"answer": "Paris"}) == (0.0, "the answer 'Lyon' is wrong")
    assert check("Paris", {"answer": "Paris"}) == (0.0, "no line 'Answer: ...' found")
    assert isinstance(namespace["SYSTEM_PROMPT"], str)
    well_formed = namespace["well_formed"]  # reads the line's feedback object, never the reference
    assert well_formed("Answer: Paris", {"max_words": 2}) == (1.0, "an answer line, short enough")
    assert well_formed("Answer: it is Paris", {"max_words": 2}) == (0.5, "the answer has 3 words; keep it to 2")
    assert well_formed("Paris", {}) == (0.0, "no line 'Answer: ...' found")


def test_the_documented_scenario_package_registers_and_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    import tomllib

    from redraft.scenarios._base import SCENARIOS

    SCENARIOS.names()  # loaded before copying, so that the copy put back is whole
    monkeypatch.setattr(SCENARIOS, "_entries", dict(SCENARIOS._entries))  # keep the registration local
    exec(doc_block("guides/extending.md", "## A scenario in a package", "python"), {})
    capitals = get_scenario("capitals")
    tasks = list(capitals.tasks(seed=0))
    assert [t.task_id for t in tasks] == ["capital-France", "capital-Japan", "capital-Kenya"]
    assert capitals.check(tasks[0], " paris\n")[0].passed
    assert capitals.check(tasks[0], "Lyon")[0].detail == "wrong city"
    toml = tomllib.loads(doc_block("guides/extending.md", "## A scenario in a package", "toml"))
    assert toml["project"]["entry-points"]["redraft.scenarios"] == {"capitals": "my_suite.capitals"}


# ---------------------------------------------------------------- what a user's check is given


def test_a_check_gets_the_lines_feedback_data_and_the_prompt_while_its_reference_is_held_out(
    tmp_path: Path,
) -> None:
    """Before, with --grade the check got {} (the reference was all gold) and never the prompt."""
    check, grade = "tests.support.check_modules:with_prompt", "tests.support.check_modules:exact_answer"
    line = {
        "id": "a",
        "prompt": "What is 3 + 4?",
        "reference": {"answer": "7"},  # held out for the grade
        "feedback": {"answer": "7", "for_prompt": "What is 3 + 4?"},  # what the check may read
    }
    with pytest.raises(UserError, match="'answer' is in both 'feedback' and 'reference'"):
        validate_task_file(write_lines(tmp_path / "clash.jsonl", line), get_scenario(f"check:{check},grade:{grade}"))
    line["reference"] = {"gold": "7"}
    scenario = f"check:{check},grade:tests.support.check_modules:by_reference"
    [task] = list(iter_tasks(write_lines(tmp_path / "tasks.jsonl", line), get_scenario(scenario)))
    assert task.reference == {"answer": "7", "for_prompt": "What is 3 + 4?"} and task.gold == {"gold": "7"}
    [verdict] = get_scenario(scenario).check(task.without_gold(), "Answer: 7")
    assert verdict.passed and verdict.detail == "correct"
