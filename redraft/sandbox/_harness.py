"""Test a candidate's function in two sandboxed processes, so that nothing but a real pass is a pass.

The rule, for every scenario that executes candidate code, in feedback and in grade alike: a pass
needs a positive signal that every test ran to its end, the values handed to the tests are plain
data, and the tests are not readable by the candidate. `run_tests` keeps it with two
`redraft.sandbox` runs at once, each in its own PID, mount and network namespace:

- the *candidate process* (callserver.py) loads only the candidate's code and serves calls to its
  entry point over two pipes; its stdout and stderr are its own, captured and capped as usual;
- the *test process* (testrunner.py) runs trusted code only: the setup (for HumanEval, the prompt,
  whose helpers some tests call, then the hidden tests) and the cases, with ``candidate`` bound to
  a proxy whose calls are round trips to the candidate process, and whose results it rebuilds from
  plain data itself (plaindata.py).

This module makes a per-run secret and gives it to the test process alone, on its stdin; the test
process writes it to a third pipe of its own only after every case returned, and only a result
carrying it counts: `HarnessResult.completed`.

See docs/architecture.md, section "What a harnessed candidate can and cannot do".
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from redraft.errors import CheckError
from redraft.plaintext import plain_text
from redraft.sandbox import _supervisor as supervisor
from redraft.sandbox import plaindata
from redraft.sandbox._limits import KillReason, SandboxLimits, SandboxResult

CaseOutcome = Literal["passed", "wrong", "failed", "raised", "not_plain", "malformed", "ended", "timeout", "not_run"]
"""How a case ended: it ``passed``; its value was not the expected one (``wrong``); the test's own
code ``failed`` (an assertion, or an error in the test on what the candidate returned); the
candidate ``raised``; or the candidate broke the protocol: it returned a value that is
``not_plain``, sent a ``malformed`` reply, its process ``ended``, or it did not reply before the
run's deadline (``timeout``). After a broken rule, every later case is ``not_run``."""
LoadOutcome = Literal["ready", "load_error", "malformed", "ended", "timeout"]

_JUDGED = ("passed", "wrong", "failed", "raised")
"""Outcomes of a case that ran by the rules (the others are broken rules, and ``not_run``)."""

SOLUTION_FILE = "solution.py"
"""The candidate's file in its own work directory (its tracebacks name it)."""
_CALLSERVER = ("plaindata", "callserver")
_TESTRUNNER = ("plaindata", "testrunner")
_CALLSERVER_MAIN = "import sys\nsys.modules['redraft_sandbox_callserver'].main()\n"
_TESTRUNNER_MAIN = "import sys\nsys.modules['redraft_sandbox_testrunner'].main()\n"
_RESULT_LIMIT = 1 << 20


@dataclass(frozen=True, kw_only=True)
class Case:
    """One test, as trusted Python run in the tests' namespace (``candidate`` and the entry point bound)."""

    name: str
    code: str
    """Statements that must complete (``check(candidate)``), or, with ``expected``, an expression."""
    expected: str | None = None
    """The source of a literal that the expression's value must equal; None: the code must complete."""


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    name: str
    outcome: CaseOutcome
    detail: str
    """Why it failed, in a line or two ("" when it passed): the assertion and its line, the candidate's
    exception and its line, ``returned 6, expected 5``, or the limit the candidate hit."""

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"


@dataclass(frozen=True, kw_only=True)
class HarnessResult:
    completed: bool
    """The test process handed back this run's secret: the cases all ran to their end."""
    loaded: bool
    """The candidate's code loaded and defines its entry point (as far as its process says)."""
    cases: tuple[CaseResult, ...]
    detail: str
    """The first reason the run failed, in a line or two; "" when it passed."""
    candidate: SandboxResult
    tests: SandboxResult

    @property
    def passed(self) -> bool:
        return self.completed and self.loaded and all(case.passed for case in self.cases)


def run_tests(
    code: str, *, entry_point: str, setup: str, cases: Sequence[Case], limits: SandboxLimits
) -> HarnessResult:
    """Run ``cases`` (after ``setup``) against ``entry_point`` of ``code``; see the module docstring.

    `CheckError` when the setup itself fails (the tests are broken, not the candidate);
    `redraft.errors.SandboxError` when either sandbox cannot start.
    """
    secret = secrets.token_hex(32)
    control = json.dumps(
        {
            "secret": secret,
            "setup": setup,
            "entry_point": entry_point,
            "cases": [{"name": c.name, "code": c.code, "expected": c.expected} for c in cases],
            "deadline_s": limits.timeout_s - min(0.5, limits.timeout_s * 0.2),
        }
    )
    spec = json.dumps({"code": code, "entry_point": entry_point, "filename": SOLUTION_FILE})
    ours: list[int] = []  # descriptors to close here, until a run they are handed to owns them
    try:
        requests_r, requests_w = _pipe(ours)
        replies_r, replies_w = _pipe(ours)
        result_r, result_w = _pipe(ours)
        cancel_r, cancel_w = _pipe(ours)
        candidate_wiring = supervisor.Wiring(channels=(requests_r, replies_w), preload=_CALLSERVER, cancel_fd=cancel_r)
        candidate_run = _Background(
            lambda: supervisor.run_wired(_CALLSERVER_MAIN, limits=limits, stdin=spec, wiring=candidate_wiring)
        )
        _hand(ours, candidate_wiring.channels)
        try:
            tests_wiring = supervisor.Wiring(channels=(requests_w, replies_r, result_w), preload=_TESTRUNNER)
            _hand(ours, tests_wiring.channels)
            tests = supervisor.run_wired(_TESTRUNNER_MAIN, limits=limits, stdin=control, wiring=tests_wiring)
        finally:
            os.write(cancel_w, b"x")  # the tests are over: the candidate's process is not needed any more
            candidate = candidate_run.join()
        report = _read_report(result_r, secret)
    finally:
        for fd in ours:
            os.close(fd)
    return _harness_result(report, candidate, tests, limits)


def _pipe(ours: list[int]) -> tuple[int, int]:
    r, w = os.pipe()
    ours += [r, w]
    return r, w


def _hand(ours: list[int], fds: tuple[int, ...]) -> None:
    """``fds`` now belong to the run they were handed to, which closes them."""
    for fd in fds:
        ours.remove(fd)


class _Background:
    """One sandboxed run in a thread of its own; `join` returns its result or raises its error."""

    def __init__(self, run: Callable[[], SandboxResult]) -> None:
        self._run = run
        self._result: SandboxResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._target, name="redraft-harness-candidate", daemon=True)
        self._thread.start()

    def _target(self) -> None:
        try:
            self._result = self._run()
        except BaseException as exc:
            self._error = exc

    def join(self) -> SandboxResult:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


def _read_report(fd: int, secret: str) -> dict[str, Any] | None:
    """The test process's result if it carries this run's secret; None otherwise (it did not finish)."""
    os.set_blocking(fd, False)
    try:
        report = json.loads(plaindata.read_frame(fd, limit=_RESULT_LIMIT))
    except (EOFError, BlockingIOError, plaindata.Malformed, ValueError):
        return None
    if not isinstance(report, dict) or not hmac.compare_digest(str(report.get("secret", "")), secret):
        return None
    return report


def _harness_result(
    report: dict[str, Any] | None, candidate: SandboxResult, tests: SandboxResult, limits: SandboxLimits
) -> HarnessResult:
    sandboxes = {"candidate": candidate, "tests": tests}
    if report is None:
        detail = _unfinished(candidate, tests, limits)
        return HarnessResult(completed=False, loaded=False, cases=(), detail=detail, **sandboxes)
    if report.get("setup_error") is not None:
        raise CheckError(f"the tests failed before calling the candidate: {plain_text(str(report['setup_error']))}")
    load: LoadOutcome = report["load"]
    loaded = load == "ready"
    load_detail = "" if loaded else _reason(load, plain_text(str(report["load_detail"])), candidate, limits)
    cases: list[CaseResult] = []
    for case in report["cases"]:
        outcome: CaseOutcome = case["outcome"]
        detail = _reason(outcome, plain_text(str(case["detail"])), candidate, limits)  # the candidate's own words
        if outcome == "not_run":  # after a broken rule: in the words of the case that broke it
            broken = next((c.detail for c in cases if c.outcome not in _JUDGED), "it broke the harness's rules")
            detail = f"not run after an earlier call: {broken}"
        cases.append(CaseResult(name=plain_text(str(case["name"])), outcome=outcome, detail=detail))
    failures = [case.detail for case in cases if not case.passed]
    detail = load_detail or (failures[0] if failures else "")
    return HarnessResult(completed=True, loaded=loaded, cases=tuple(cases), detail=detail, **sandboxes)


def _reason(outcome: str, detail: str, candidate: SandboxResult, limits: SandboxLimits) -> str:
    """The words for an outcome: a broken rule is told from what this side saw of the candidate's process."""
    if outcome == "timeout":
        return kill_detail("timeout", candidate, limits)
    if outcome == "ended" and candidate.killed_by not in (None, "cancelled"):
        return kill_detail(candidate.killed_by, candidate, limits)
    if outcome == "ended" and candidate.returncode is not None:
        return f"the candidate's process exited with code {candidate.returncode} instead of replying"
    if outcome == "ended":
        return "the candidate's process stopped replying (it closed its pipe)"
    return detail


def _unfinished(candidate: SandboxResult, tests: SandboxResult, limits: SandboxLimits) -> str:
    """Why the test process handed back no secret."""
    if tests.killed_by not in (None, "cancelled"):
        return kill_detail(tests.killed_by, tests, limits)
    if candidate.killed_by not in (None, "cancelled"):
        return kill_detail(candidate.killed_by, candidate, limits)
    last = tests.stderr.strip().splitlines()[-1:]
    return "the tests did not run to their end" + (f": {last[0][:300]}" if last else "")


def kill_detail(reason: KillReason | None, result: SandboxResult, limits: SandboxLimits) -> str:
    """A limit the run hit, in words for the model: ``timed out after 10 s (...)``, ``killed: ...``."""
    match reason:
        case "timeout":
            return f"timed out after {limits.timeout_s:g} s (an infinite loop, or far too slow)"
        case "output_limit":
            return f"killed: printed more than {limits.max_output_bytes} bytes"
        case "memory_limit":
            return f"killed: memory limit ({limits.memory_mb} MB)"
        case "cpu_limit":
            return f"killed: CPU time limit ({limits.cpu_s} s)"
    return f"killed: {result.kill_description}"
