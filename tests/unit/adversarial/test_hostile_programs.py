"""Hostile programs: each file in ``programs/`` runs in the sandbox and must have the outcome its header states.

A header is the file's leading comment lines of the form ``# key: value``:

- ``limits``: ``SandboxLimits`` fields (``timeout_s=2 cpu_s=60``);
- ``killed_by``, ``returncode``: the result's values (``None`` for none);
- ``stdout`` / ``stdout-not``: text the output must hold / must not hold;
- ``stderr-last``: the last line of stderr;
- ``absent``: paths that must not exist afterwards;
- ``root: yes``: the outcome holds for a root caller (CI runs as root).

Whatever the program, nothing may be left behind: no process of the sandbox and no work directory.
Then the caller itself dies: a verifier SIGKILLed in the middle of a check leaves no process, and
the next verifier to start on the machine removes the work directory it left.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from redraft.sandbox import SandboxLimits, run_python
from redraft.sandbox import _workdirs as workdirs
from tests.support.sandbox_processes import leftover_processes, private_tempdir, wait_for_sandbox, workdirs_of

PROGRAMS = sorted((Path(__file__).parent / "programs").glob("*.py"))
KEYS = {"limits", "killed_by", "returncode", "stdout", "stdout-not", "stderr-last", "absent", "root"}


def header(path: Path) -> dict[str, str]:
    fields = {}
    for line in path.read_text().splitlines():
        if not line.startswith("# "):
            break
        key, sep, value = line[2:].partition(": ")
        if sep and key in {
            "limits",
            "killed_by",
            "returncode",
            "stdout",
            "stdout-not",
            "stderr-last",
            "absent",
            "root",
        }:
            fields[key] = value.strip()
    return fields


def test_the_corpus_holds_every_hostile_program_with_an_outcome() -> None:
    assert len(PROGRAMS) >= 19
    for path in PROGRAMS:
        fields = header(path)
        assert "killed_by" in fields and ({"returncode", "stdout", "stderr-last"} & fields.keys()), path.name


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_a_hostile_program_has_its_outcome_and_leaves_nothing(path: Path) -> None:
    expected = header(path)
    if expected.get("root") == "yes" and os.geteuid() != 0:
        pytest.skip("this outcome is the root caller's (uid drop, namespaces)")
    limits = dict(pair.split("=") for pair in expected.get("limits", "").split())
    types = {f.name: f.type for f in dataclasses.fields(SandboxLimits)}
    given = {k: float(v) if types[k] == "float" else int(v) for k, v in limits.items()}
    result = run_python(path.read_text(), limits=SandboxLimits(**given))
    seen = f"{result.killed_by=} {result.returncode=}\nstdout: {result.stdout[-300:]}\nstderr: {result.stderr[-500:]}"
    assert str(result.killed_by) == expected["killed_by"], seen
    if "returncode" in expected:
        assert str(result.returncode) == expected["returncode"], seen
    if "stdout" in expected:
        assert expected["stdout"] in result.stdout, seen
    if "stdout-not" in expected:
        assert expected["stdout-not"] not in result.stdout, seen
    if "stderr-last" in expected:
        assert result.stderr.rstrip().splitlines()[-1] == expected["stderr-last"], seen
    for absent in expected.get("absent", "").split():
        assert not os.path.exists(absent), f"{absent} escaped the sandbox"
    assert leftover_processes(f"{workdirs.PREFIX}{os.getpid()}-", wait_s=10) == []
    assert workdirs_of(os.getpid()) == []


# ---------------------------------------------------------------- the caller dies mid-check

VERIFIER = """
import asyncio
from redraft.engine.verifier import Verifier
from redraft.protocols.messages import Draft, VerifyRequest
from redraft.scenarios import get_scenario

task = next(get_scenario("humaneval").tasks(seed=0)).without_gold()
code = "```python\\ndef has_close_elements(numbers, threshold):\\n    return False\\n\\nwhile True:\\n    pass\\n```"
draft = Draft(task_id=task.task_id, round=0, sample=0, text=code)
asyncio.run(Verifier("humaneval").verify(VerifyRequest(task=task, draft=draft)))
"""


@pytest.mark.timeout(120)
def test_a_verifier_killed_mid_check_leaves_no_process_and_the_next_one_sweeps_its_work_dir() -> None:
    with private_tempdir():  # no other test run's verifier sweeps the work dir left here on purpose
        _verifier_killed_mid_check_leaves_nothing()


def _verifier_killed_mid_check_leaves_nothing() -> None:
    caller = subprocess.Popen([sys.executable, "-c", VERIFIER], stdout=subprocess.PIPE, text=True)
    try:
        marker = wait_for_sandbox(caller)  # launcher, keeper and the looping candidate all run
    finally:
        caller.kill()  # SIGKILL: the verifier's process can clean up nothing
        caller.wait()
    assert leftover_processes(marker, wait_s=10) == []  # the sandbox died with its caller
    left = workdirs_of(caller.pid)
    assert 1 <= len(left) <= 2, left  # the harness runs the candidate and the tests in a sandbox each
    code = "from redraft.engine.verifier import Verifier\nVerifier('humaneval')"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)  # a verifier starts on this node
    assert not any(path.exists() for path in left) and workdirs_of(caller.pid) == []
