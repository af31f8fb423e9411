"""The ``check:MODULE:FUNCTION`` scenarios: a task file's tasks judged by functions people bring.

The whole scenario is in its name, so every verifier actor can rebuild it by
importing ``MODULE`` (it must be importable in the Ray workers: see the docs page
"Your own tasks and checks"); one made from function objects (`UserCheck.of`) travels
to the actors by value instead. The tasks come from a task file
(`redraft.scenarios.taskfile`), never from the scenario itself.

The check is feedback. A separate grade function may be named after it,
``check:MODULE:FUNCTION,grade:MODULE:FUNCTION`` (``--check ... --grade ...``):
then the task file's ``reference`` is held out for the grade alone, and the check
gets the line's ``feedback`` object (what a user has at inference time: a schema,
visible test cases); without a grade, the check gets the ``reference`` too, and the
run has no held-out grade (its grades are null, never 0).

A check function that raises, or returns anything else, is a bug in the check,
not evidence against the candidate: the task ends with stop reason ``error`` and
cause `CheckError`, whose message names the function and what it raised, with its
traceback kept in the record. Its words never reach the drafter as feedback.

See docs/architecture.md, section "The check contract".
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from redraft.errors import CheckError, UserError
from redraft.protocols.messages import CheckResult, Task
from redraft.scenarios._base import Scenario, scenario

DEFAULT_SYSTEM_PROMPT = "Answer the task. Follow its instructions exactly and keep the answer concise."
_DETAIL_CHARS = 500

CheckFunction = Callable[..., Any]
"""``(text, data)`` or ``(text, data, prompt)`` -> a score, or (score, detail)."""


def load_check(target: str) -> tuple[Any, CheckFunction]:
    """Import ``MODULE:FUNCTION``: (the module, the function). `UserError` saying how to fix it otherwise."""
    module_name, sep, function_name = target.rpartition(":")
    if not sep or not module_name or not function_name:
        raise UserError(f"a check must be given as MODULE:FUNCTION, e.g. my_checks:exact_match; got {target!r}")
    # The current directory is on the import path even under the `redraft` console script (whose
    # sys.path lacks it), so a module beside the task file imports alike on the driver and in the
    # verifier actors of a local Ray (its workers start in the driver's directory).
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name != missing and not module_name.startswith(missing + "."):  # one of its own imports
            raise UserError(f"check module {module_name!r} failed to import: {exc}") from None
        raise UserError(
            f"cannot import check module {module_name!r} ({exc}); run redraft from the directory that holds it, "
            "add that directory to PYTHONPATH, or install it as a package"
        ) from None
    except Exception as exc:  # a syntax error, or its module-level code raised
        raise UserError(f"check module {module_name!r} failed to import: {type(exc).__name__}: {exc}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise UserError(f"check module {module_name!r} has no function {function_name!r}")
    return module, function


def to_check_result(name: str, returned: Any, *, function: str = "") -> CheckResult:
    """The check function's return value as a `CheckResult`; `CheckError` when it breaks the contract."""
    score, detail = returned, ""
    if isinstance(returned, tuple | list) and len(returned) == 2 and isinstance(returned[1], str):
        score, detail = returned
    value = _as_score(score)
    if value is None:
        raise CheckError(
            f"the check {function or name} returned {_short(returned)}; it must return (score, detail) with a "
            "score in [0, 1]",
            raised="BrokenContract",
            where=function or name,
        )
    return CheckResult(name=name, passed=value >= 1.0, score=value, detail=detail[:_DETAIL_CHARS])


def _as_score(value: Any) -> float | None:
    """A bool or a real number in [0, 1] (numpy's included, as checks often compute with it), else None."""
    kind = type(value)
    if isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in {"bool", "bool_"}):
        return float(bool(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) and 0.0 <= number <= 1.0 else None
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


GRADE_SEPARATOR = ",grade:"


def user_scenario_name(check: str, grade: str | None = None) -> str:
    """The scenario name of a check (and a grade): ``check:MOD:FN`` or ``check:MOD:FN,grade:MOD:FN``."""
    return f"check:{check}" + (f"{GRADE_SEPARATOR}{grade}" if grade else "")


@scenario("check:MODULE:FUNCTION")
class UserCheck(Scenario):
    """Tasks from a task file (``--tasks``), steered by the check ``MODULE:FUNCTION`` (and graded by ``--grade``)."""

    needs_task_file = True
    """Its tasks come only from ``--tasks`` (a run without them is refused before it starts)."""

    def __init__(self, target: str) -> None:
        check, _, grade = target.partition(GRADE_SEPARATOR)
        module, function = load_check(check)
        self._set_up(check, function, grade, load_check(grade)[1] if grade else None, _system_prompt_of(module))

    @classmethod
    def of(
        cls, check: CheckFunction, grade: CheckFunction | None = None, *, system_prompt: str | None = None
    ) -> UserCheck:
        """The scenario of functions given as objects (the Python API): named ``check:MODULE:QUALNAME`` like one
        named on the command line, travelling to the actors by value when they cannot import it by name."""
        made = cls.__new__(cls)
        prompt = system_prompt or _system_prompt_of(sys.modules.get(check.__module__))
        made._set_up(_target(check), check, _target(grade) if grade else "", grade, prompt)
        return made

    def _set_up(
        self, check: str, function: CheckFunction, grade: str, grader: CheckFunction | None, system_prompt: str
    ) -> None:
        self.name = user_scenario_name(check, grade or None)
        self._function, self._system_prompt = function, system_prompt
        self._check_target, self._check_name = check, check.rpartition(":")[2]
        self._wants_prompt = _takes_three(function)
        self._grade = grader
        self._grade_target, self._grade_name = grade, grade.rpartition(":")[2]

    def split_reference(self, reference: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """With a grade, the file's reference is its gold; without one, it is the check's data."""
        return ({}, dict(reference)) if self._grade else (dict(reference), {})

    def tasks(self, *, seed: int) -> Iterator[Task]:
        raise UserError(f"the scenario {self.name!r} has no tasks of its own; give them with --tasks FILE.jsonl")

    def system_prompt(self) -> str:
        return self._system_prompt

    def answer(self, text: str) -> str | None:
        normalised = " ".join(text.split())
        return normalised or None

    def check(self, task: Task, text: str) -> list[CheckResult]:
        data = dict(task.reference)
        returned = self._function(text, data, task.prompt) if self._wants_prompt else self._function(text, data)
        return [to_check_result(self._check_name, returned, function=self._check_target)]

    def grade(self, task: Task, text: str) -> CheckResult | None:
        if self._grade is None:
            return None
        return _call(self._grade_name, self._grade_target, self._grade, text, task.gold)


def _call(name: str, target: str, function: CheckFunction, text: str, reference: dict[str, Any]) -> CheckResult:
    """A user function's verdict. What it raises goes up (the verifier makes it a `CheckError` naming the
    function); a broken contract is a `CheckError` here."""
    return to_check_result(name, function(text, dict(reference)), function=target)


def _takes_three(function: CheckFunction) -> bool:
    """Whether ``function`` takes a third positional argument (the task's prompt)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: the two-argument contract
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


def _system_prompt_of(module: Any) -> str:
    """``MODULE.SYSTEM_PROMPT`` when the check's module defines one, else the default instructions."""
    prompt = getattr(module, "SYSTEM_PROMPT", None)
    return prompt if isinstance(prompt, str) and prompt.strip() else DEFAULT_SYSTEM_PROMPT


def _target(function: CheckFunction) -> str:
    """``MODULE:QUALNAME`` of a function, as a check is named on the command line."""
    return f"{getattr(function, '__module__', None) or 'python'}:{getattr(function, '__qualname__', repr(function))}"
