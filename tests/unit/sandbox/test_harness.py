"""The two-process harness: only plain data crosses, only the test process's secret makes a pass.

Real sandboxed processes throughout (but for the codec's own tests): a candidate process that may
do anything, and a test process that runs trusted code only.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from redraft.errors import CheckError
from redraft.sandbox import Case, HarnessResult, SandboxLimits, plaindata, run_tests
from redraft.sandbox import _harness as harness
from redraft.sandbox import _supervisor as supervisor

ROOT = os.geteuid() == 0
SETUP = "def double(x):\n    '''Twice x.'''\n"
DOUBLES = [Case(name="one", code="double(2)", expected="4"), Case(name="two", code="assert candidate(5) == 10")]
HONEST = "def double(x):\n    return 2 * x\n"


def run(code: str, cases: list[Case] = DOUBLES, setup: str = SETUP, **limits: float) -> HarnessResult:
    return run_tests(
        textwrap.dedent(code), entry_point="double", setup=setup, cases=cases, limits=SandboxLimits(**limits)
    )


# ---------------------------------------------------------------- plain data


PLAIN = [
    None,
    True,
    0,
    -(2**200),
    2**63,
    1.5,
    -0.0,
    float("inf"),
    3 + 4j,
    "text \udcff ✓",
    b"\x00\xff",
    [1, [2, (3, {4})]],
    (),
    {"a": [1], (1, "b"): frozenset({2.5})},
    set(),
]


@pytest.mark.parametrize("value", PLAIN, ids=repr)
def test_plain_values_cross_unchanged_with_their_exact_types(value: object) -> None:
    back = plaindata.from_tree(plaindata.loads(plaindata.dumps(plaindata.to_tree(value))))
    assert back == value and type(back) is type(value)
    assert repr(back) == repr(value)  # -0.0 stays negative, a tuple stays a tuple inside a list


def test_nan_crosses_as_nan() -> None:
    assert math.isnan(plaindata.from_tree(plaindata.loads(plaindata.dumps(plaindata.to_tree(float("nan"))))))


class LyingInt(int):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


class LyingStr(str):
    pass


def _generator() -> object:
    yield 1


def _deep() -> list[object]:
    value: list[object] = []
    for _ in range(plaindata.MAX_DEPTH + 1):
        value = [value]
    return value


def _cycle() -> list[object]:
    value: list[object] = []
    value.append(value)
    return value


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (LyingInt(3), f"an instance of {__name__}.LyingInt"),
        (LyingStr("x"), f"an instance of {__name__}.LyingStr"),
        ([1, [object()]], "an instance of object"),
        (_generator(), "an instance of generator"),
        (lambda: 1, "an instance of function"),
        ({1: {2: 2}.keys()}, "an instance of dict_keys"),
        (_deep(), f"nested deeper than {plaindata.MAX_DEPTH} levels"),
        (_cycle(), f"nested deeper than {plaindata.MAX_DEPTH} levels"),
    ],
)
def test_anything_else_is_not_plain_and_named(value: object, named: str) -> None:
    with pytest.raises(plaindata.NotPlain, match=named):
        plaindata.to_tree(value)


def test_a_value_too_large_to_send_is_not_plain() -> None:
    with pytest.raises(plaindata.NotPlain, match=r"a value of \d+ bytes as plain data, over the 1048576-byte limit"):
        plaindata.dumps(plaindata.to_tree(list(range(300_000))))


@pytest.mark.parametrize(
    "payload",
    [
        b'{"a": 1}',  # a JSON object is no tree node
        b'["eval", "__import__(\'os\')"]',  # an unknown tag is refused, never looked up
        b'["list", [1], 2]',
        b'["set", [["list", []]]]',  # an unhashable member
        b'["int", "zz"]',
        b'["dict", [[1]]]',
        b"[" * 5000 + b"]" * 5000,  # deeper than JSON's own recursion
        b'["list", ' * 150 + b"[]" + b"]" * 150,
        b"\xff",
    ],
)
def test_a_malformed_tree_is_refused(payload: bytes) -> None:
    with pytest.raises(plaindata.Malformed):
        plaindata.from_tree(plaindata.loads(payload))


def test_a_frame_is_read_within_its_limit_and_its_deadline() -> None:
    r, w = os.pipe()
    try:
        plaindata.write_frame(w, b"[1]")
        assert plaindata.read_frame(r) == b"[1]"
        os.write(w, (10**9).to_bytes(4, "big"))
        with pytest.raises(plaindata.Malformed, match="over the"):
            plaindata.read_frame(r)  # refused from its length alone: nothing more is read
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            plaindata.read_frame(r, deadline=time.monotonic() + 0.2)
        assert time.monotonic() - started < 2
    finally:
        os.close(w)
    with pytest.raises(EOFError):
        plaindata.read_frame(r)
    os.close(r)


# ---------------------------------------------------------------- the two processes


def test_an_honest_candidate_passes_every_case_in_its_own_namespaces() -> None:
    result = run(HONEST)
    assert result.passed and result.completed and result.loaded and result.detail == ""
    assert [(c.name, c.outcome) for c in result.cases] == [("one", "passed"), ("two", "passed")]
    if ROOT:
        for side in (result.candidate, result.tests):
            assert {"pidns", "mountns", "netns", "uid:65534"} <= set(side.layers)


def test_each_case_is_judged_on_its_own_and_named() -> None:
    result = run("def double(x):\n    return 4 if x == 2 else x\n")
    assert not result.passed and result.completed
    one, two = result.cases
    assert (one.outcome, two.outcome) == ("passed", "failed")
    assert two.detail.startswith("AssertionError") and result.detail == two.detail
    wrong = run("def double(x):\n    return x\n")
    assert wrong.cases[0].outcome == "wrong" and wrong.cases[0].detail == "returned 2, expected 4"


def test_the_candidate_s_exception_is_its_own_summary() -> None:
    result = run("def double(x):\n    return x / 0\n")
    assert [c.outcome for c in result.cases] == ["raised", "raised"]
    assert result.detail == "ZeroDivisionError: division by zero\n  in double: return x / 0"


def test_output_is_the_candidate_s_own_and_does_not_reach_the_verdict() -> None:
    result = run("print('PASSED all tests')\ndef double(x):\n    print('ok', x)\n    return x\n")
    assert not result.passed
    assert result.candidate.stdout == "PASSED all tests\nok 2\nok 5\n"
    assert result.tests.stdout == ""


SNOOP = """
    import os

    def read(path):
        try:
            with open(path, "rb") as f:
                return f.read(1_000_000).decode("latin-1")
        except OSError:
            return ""

    def snoop():
        pids = sorted(p for p in os.listdir("/proc") if p.isdigit())
        seen, fds = [], []
        for pid in pids:
            seen += [read(f"/proc/{pid}/cmdline"), read(f"/proc/{pid}/environ")]
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                    seen += [link, read(f"/proc/{pid}/fd/{fd}")]
                    if pid == str(os.getpid()) and not link.endswith("/fd"):
                        fds.append(fd)
            except OSError:
                pass
        for root in ["/tmp", "/var/tmp", "/dev/shm", os.getcwd()]:
            for dirpath, _, files in os.walk(root):
                seen += [read(os.path.join(dirpath, name)) for name in files]
        print("\\n".join(seen))
        return pids, sorted(fds, key=int)
"""


@pytest.mark.skipif(not ROOT, reason="the namespaces that hide the test process are the root path")
def test_the_candidate_sees_neither_the_tests_nor_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "f00d" * 16
    monkeypatch.setattr(harness.secrets, "token_hex", lambda n: secret)
    marker = "HIDDEN-TEST-MARKER-2718"
    setup = f"def snoop():\n    pass\n\ndef check(candidate):\n    assert '{marker}'\n"
    # The tests process reads the candidate's answer; a candidate that found the marker fails the case. It sees
    # its own process only: not its keeper (PID 1, another uid), which its /proc does not show.
    cases = [
        Case(name="processes", code="candidate()[0]", expected="['2']"),
        Case(name="descriptors", code="candidate()[1]", expected="['0', '1', '2', '3', '4']"),
    ]
    result = run_tests(textwrap.dedent(SNOOP), entry_point="snoop", setup=setup, cases=cases, limits=SandboxLimits())
    assert result.passed, result.detail
    assert marker in setup and result.candidate.stdout  # it looked, and printed what it saw
    assert marker not in result.candidate.stdout and secret not in result.candidate.stdout
    assert "def check" not in result.candidate.stdout


def test_a_test_process_that_exits_early_is_no_pass() -> None:
    """Exit code 0 is no signal: without the secret, written after the cases, nothing passed."""
    result = run(HONEST, cases=[*DOUBLES, Case(name="exit", code="import os; os._exit(0)")])
    assert result.tests.returncode == 0 and result.tests.killed_by is None
    assert not result.completed and not result.passed
    assert result.detail == "the tests did not run to their end"


def test_a_result_without_the_run_s_secret_is_no_pass() -> None:
    forge = (
        "import json, os, sys\n"
        "fake = json.dumps({'secret': '0' * 64, 'load': 'ready', 'load_detail': '', 'cases': []}).encode()\n"
        "os.write(5, len(fake).to_bytes(4, 'big') + fake)\n"
        "os._exit(0)"
    )
    result = run(HONEST, cases=[Case(name="forge", code=forge)])
    assert not result.completed and not result.passed


def test_broken_tests_are_a_check_error_not_a_failed_candidate() -> None:
    with pytest.raises(CheckError, match="the tests failed before calling the candidate: NameError"):
        run(HONEST, setup="undefined_helper()\n")


@pytest.mark.timeout(60)
def test_a_candidate_that_outlives_its_tests_is_cancelled_at_once() -> None:
    stubborn = """
        import atexit, threading, time
        threading.Thread(target=time.sleep, args=(600,)).start()  # not a daemon: exit waits for it
        atexit.register(time.sleep, 600)
        def double(x):
            return 2 * x
    """
    started = time.monotonic()
    result = run(stubborn, timeout_s=20.0)
    assert result.passed
    assert result.candidate.killed_by == "cancelled" and result.candidate.kill_description == "cancelled"
    assert time.monotonic() - started < 10


def test_the_harness_runs_from_a_package_under_tmp(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox hides /tmp behind a tmpfs: a checkout there must still hand the candidate its modules."""
    with tempfile.TemporaryDirectory(dir="/tmp") as where:
        copy = Path(where) / "sandbox"
        shutil.copytree(Path(supervisor.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
        monkeypatch.setattr(supervisor, "LAUNCHER", copy / "launcher.py")
        result = run(HONEST)
    assert result.passed and result.completed, result.detail
    if ROOT:
        assert "view" in result.candidate.layers
