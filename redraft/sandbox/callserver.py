"""The candidate process of a harnessed run: load the candidate's code, then serve calls to its entry point.

Standard library only. The launcher loads it by path (after plaindata.py), still privileged, and
the run's one-line main program calls `main`. The candidate's code runs in this same interpreter,
so it can tamper with everything here: patch this module, write to the pipes itself, exit at any
moment. Nothing this process says is trusted: the test process (testrunner.py) accepts only
well-formed frames of plain data (plaindata.py) and alone decides. This file only has to be right
for an honest candidate.

Protocol, on the descriptors the launcher placed: requests arrive on fd 3, replies leave on fd 4,
one frame each. stdin holds ``{"code", "entry_point", "filename"}``. The code is written to
``filename`` in the work directory (so its tracebacks show its lines) and run as a module named
``solution``, not ``__main__``: a ``if __name__ == "__main__":`` demo does not run, as when tests
import a solution. The first reply is ``["ready"]``, or ``["load_error", summary]`` when loading
raised (``SystemExit`` included) or left no callable entry point. Then each ``["call", args,
kwargs]`` (trees) gets ``["return", tree]``, ``["raise", summary]`` or ``["not_plain", what]``.
At the end of the requests, it exits.
"""

from __future__ import annotations

import json
import os
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from redraft.sandbox import plaindata
else:
    plaindata = sys.modules["redraft_sandbox_plaindata"]  # loaded by the launcher before this module

REQUESTS_FD, REPLIES_FD = 3, 4


def main() -> None:
    spec = json.loads(sys.stdin.read())
    filename = os.path.abspath(str(spec["filename"]))
    source = str(spec["code"]).encode("utf-8", errors="surrogateescape")
    lines = source.decode("utf-8", errors="replace").splitlines()
    entry = load(source, filename, lines, str(spec["entry_point"]))
    if entry is not None:
        serve(entry, filename, lines)


def send(message: Any) -> None:
    plaindata.write_frame(REPLIES_FD, plaindata.dumps(message))


def load(source: bytes, filename: str, lines: list[str], entry_point: str) -> Callable[..., Any] | None:
    """Run the candidate's module; its entry point, after replying ready (None after a load error)."""
    with open(filename, "wb") as f:
        f.write(source)
    module = types.ModuleType("solution")
    module.__file__ = filename
    sys.modules["solution"] = module
    try:
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)
    except BaseException as exc:  # SystemExit too: exiting while loading is no solution
        send(["load_error", plaindata.summarize(exc, filename, lines)])
        return None
    entry = module.__dict__.get(entry_point)
    if not callable(entry):
        send(["load_error", f"the code defines no function {entry_point!r}"])
        return None
    send(["ready"])
    return entry  # type: ignore[no-any-return]


def serve(entry: Callable[..., Any], filename: str, lines: list[str]) -> None:
    while True:
        try:
            request = plaindata.loads(plaindata.read_frame(REQUESTS_FD))
        except EOFError:
            return  # the tests are done
        _, args, kwargs = request
        try:
            value = entry(*plaindata.from_tree(args), **plaindata.from_tree(kwargs))
        except BaseException as exc:
            send(["raise", plaindata.summarize(exc, filename, lines)])
            continue
        try:
            payload = plaindata.dumps(["return", plaindata.to_tree(value)])
        except plaindata.NotPlain as exc:
            payload = plaindata.dumps(["not_plain", str(exc)])
        except Exception as exc:  # e.g. RecursionError under a lowered recursion limit
            payload = plaindata.dumps(["not_plain", f"a value that could not be encoded ({type(exc).__name__})"])
        plaindata.write_frame(REPLIES_FD, payload)
