"""The test process of a harnessed run: trusted code only, and the one judge of the run.

Standard library only. The launcher loads it by path (after plaindata.py), still privileged, and
the run's one-line main program calls `main`. No code of the candidate's runs here: stdin (an
unlinked file) brings the trusted setup (e.g. a HumanEval prompt, whose helpers some tests call,
then the hidden ``check`` function), the cases, the entry point's name and the run's secret. The
candidate's process is in another PID and mount namespace, so it can neither read this process
nor its stdin. ``candidate``, and the entry point's name, are bound to a `CandidateProxy` proxy: a call
sends its arguments to the candidate's process (fd 3) and takes back its reply (fd 4), which must
be one well-formed frame of plain data, rebuilt here from builtins (plaindata.py).

Invariants:

- The result, with the secret, is written to fd 5 once, after every case returned. A run that
  ends any other way (killed at a limit, crashed) writes no secret, and the caller (harness.py)
  takes a missing or wrong secret as a failure.
- A case passes only if its trusted code completed (and its value equals the expected one) and
  the candidate broke no rule meanwhile. A reply that is not plain data, malformed, late, or
  missing (its process ended) fails the case even if the test code caught the exception (it is a
  `BaseException`, and it is recorded), and every later case is not run.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from redraft.sandbox import plaindata
else:
    plaindata = sys.modules["redraft_sandbox_plaindata"]  # loaded by the launcher before this module

REQUESTS_FD, REPLIES_FD, RESULT_FD = 3, 4, 5
SETUP_FILE = "tests.py"
"""The setup's name in tracebacks (it is not a file anywhere)."""
RESULT_LIMIT = 60_000
"""The result must fit a pipe's buffer: the caller reads it after this process has ended."""
_VALUE_CHARS = 200


class Violation(BaseException):
    """The candidate broke the protocol; ``outcome`` says how. Not an Exception: tests do not catch it."""

    def __init__(self, outcome: str, detail: str) -> None:
        super().__init__(detail)
        self.outcome, self.detail = outcome, detail


class CandidateRaised(Exception):
    """The candidate's function raised; the message is its summary, as the candidate's side sent it."""


class CandidateProxy:
    """Stands for the candidate's function in the tests: each call is a round trip to its process."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.violation: Violation | None = None
        """The first rule the candidate broke; every later call raises it again."""

    def ready(self) -> tuple[str, str]:
        """Wait for the candidate's first reply: ``("ready", "")``, or the outcome and detail of a failed load."""
        try:
            reply = self._receive()
        except Violation as exc:
            return exc.outcome, exc.detail
        match reply:
            case ["ready"]:
                return "ready", ""
            case ["load_error", str() as summary]:
                return "load_error", summary[: plaindata.MAX_TEXT]
        self.violation = Violation("malformed", "sent something else than its ready message")
        return self.violation.outcome, self.violation.detail

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.violation is not None:
            raise self.violation
        request = plaindata.dumps(["call", plaindata.to_tree(args), plaindata.to_tree(kwargs)])
        try:
            plaindata.write_frame(REQUESTS_FD, request)
        except BrokenPipeError:
            self._violate("ended", "the candidate's process ended")
        match self._receive():
            case ["return", tree]:
                try:
                    return plaindata.from_tree(tree)
                except plaindata.Malformed as exc:
                    self._violate("malformed", f"sent a malformed value ({exc})")
            case ["raise", str() as summary]:
                raise CandidateRaised(summary[: plaindata.MAX_TEXT])
            case ["not_plain", str() as what]:
                self._violate("not_plain", f"returned {what[: plaindata.MAX_TEXT]}")
            case _:
                self._violate("malformed", "sent a reply that is not one of the protocol's")

    def _receive(self) -> Any:
        try:
            return plaindata.loads(plaindata.read_frame(REPLIES_FD, deadline=self.deadline))
        except EOFError:
            self._violate("ended", "the candidate's process ended")
        except TimeoutError:
            self._violate("timeout", "no reply in time")
        except plaindata.Malformed as exc:
            self._violate("malformed", f"sent a malformed reply ({exc})")

    def _violate(self, outcome: str, detail: str) -> NoReturn:
        self.violation = Violation(outcome, detail)
        raise self.violation


def main() -> None:
    control = json.loads(sys.stdin.read())
    secret = str(control["secret"])
    candidate = CandidateProxy(deadline=time.monotonic() + float(control["deadline_s"]))
    setup = str(control["setup"])
    lines = setup.splitlines()
    namespace: dict[str, Any] = {"__name__": "tests", "__builtins__": builtins}
    try:
        exec(compile(setup, SETUP_FILE, "exec", dont_inherit=True), namespace)
    except BaseException as exc:  # the trusted tests are broken: no evidence about the candidate
        report(secret=secret, setup_error=plaindata.summarize(exc, SETUP_FILE, lines))
        return
    load, load_detail = candidate.ready()
    namespace["candidate"] = namespace[str(control["entry_point"])] = candidate
    cases = [run_case(case, namespace, candidate, lines) for case in control["cases"]] if load == "ready" else []
    os.close(REQUESTS_FD)  # the candidate's process ends at the end of its requests
    report(secret=secret, load=load, load_detail=load_detail, cases=cases)


def run_case(
    case: dict[str, Any], namespace: dict[str, Any], candidate: CandidateProxy, lines: list[str]
) -> dict[str, str]:
    """One case's outcome: its code run in ``namespace``, its value compared with the expected one."""
    name = str(case["name"])
    if candidate.violation is not None:
        return {"name": name, "outcome": "not_run", "detail": candidate.violation.detail}
    expected = None if case["expected"] is None else ast.literal_eval(str(case["expected"]))
    outcome, detail = "passed", ""
    try:
        if case["expected"] is None:
            exec(compile(str(case["code"]), "<case>", "exec", dont_inherit=True), namespace)
        else:
            got = eval(compile(str(case["code"]), "<case>", "eval", dont_inherit=True), namespace)
            if not same(got, expected):
                outcome, detail = "wrong", f"returned {shown(got)}, expected {shown(expected)}"
    except CandidateRaised as exc:
        outcome, detail = "raised", str(exc)
    except BaseException as exc:  # the tests' own verdict (an assertion), or an error in them
        outcome, detail = "failed", plaindata.summarize(exc, SETUP_FILE, lines)
    if candidate.violation is not None:  # whatever the test code made of it
        outcome, detail = candidate.violation.outcome, candidate.violation.detail
    return {"name": name, "outcome": outcome, "detail": detail}


def same(got: Any, expected: Any) -> bool:
    """Equal values; an expected bool wants a bool (``1 == True`` is no answer to "True")."""
    return bool(got == expected) and (type(expected) is not bool or type(got) is bool)


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 3] + "..."


def report(**fields: Any) -> None:
    payload = json.dumps(fields).encode()
    if len(payload) > RESULT_LIMIT:  # too many long details: keep their beginnings
        for case in fields.get("cases", []):
            case["detail"] = case["detail"][:100]
        payload = json.dumps(fields).encode()[:RESULT_LIMIT]
    plaindata.write_frame(RESULT_FD, payload)
