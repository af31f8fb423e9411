"""Solutions that attack the harness instead of solving the problem: each fails, in feedback and in grade.

Each attack is a wrong (or unfinished) ``add`` for HumanEval/53, whose prompt shows two examples
(the feedback) and whose hidden tests try random pairs (the grade), dressed in a way to make a
check report success: exiting early, patching what reports a failure, returning an object that
equals anything, forging frames, reading the tests, killing its overseers, outwaiting the clock,
flooding the output. Before the two-process harness, six of the first eight passed the grade.
"""

from __future__ import annotations

import pytest

from redraft.sandbox import SandboxLimits
from redraft.scenarios.builtin.humaneval import HumanEval

SCENARIO = HumanEval(limits=SandboxLimits(timeout_s=3.0))
TASK = next(t for t in SCENARIO.tasks(seed=0) if t.task_id == "HumanEval/53")

# Each would pass, or did pass, a harness that trusted an exit code, a stream or the returned object.
ATTACKS: dict[str, str] = {
    "system_exit": "raise SystemExit(0)",  # a bare body: the prompt's function exits when called
    "system_exit_at_load": "raise SystemExit(0)\ndef add(x, y):\n    return x + y",
    "os_exit_at_load": "import os\nos._exit(0)\ndef add(x, y):\n    return x + y",
    "atexit_os_exit": "import atexit, os\natexit.register(os._exit, 0)\ndef add(x, y):\n    return 0",
    "patched_sys_exit": "import os, sys\nsys.exit = lambda *a: os._exit(0)\ndef add(x, y):\n    assert False",
    "patched_print_exception": (
        "import os, traceback\ntraceback.print_exception = lambda *a, **k: os._exit(0)\n"
        "def add(x, y):\n    assert False"
    ),
    "equals_anything": (
        "class Anything:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    __hash__ = object.__hash__\n"
        "def add(x, y):\n    return Anything()"
    ),
    "patched_excepthook": "import os, sys\nsys.excepthook = lambda *a: os._exit(0)\ndef add(x, y):\n    assert False",
    "system_exit_when_called": "def add(x, y):\n    raise SystemExit(0)",
    "os_exit_when_called": "import os\ndef add(x, y):\n    os._exit(0)",
    "fake_success_on_stdout": (
        "print('ran without an error')\nprint('OK: all tests passed')\n"
        "def add(x, y):\n    print('PASSED')\n    return 0"
    ),
    "int_subclass_equal_to_all": (
        "class Int(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "def add(x, y):\n    return Int(x + y + 1)"
    ),
    "str_subclass_equal_to_all": (
        "class Str(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
        "def add(x, y):\n    return Str('')"
    ),
    "list_subclass_equal_to_all": (
        "class List(list):\n    def __eq__(self, other):\n        return True\ndef add(x, y):\n    return List()"
    ),
    "truthy_hash_colliding_object": (
        "class Yes:\n"
        "    def __bool__(self):\n        return True\n"
        "    def __hash__(self):\n        return hash(5)\n"
        "    def __eq__(self, other):\n        return True\n"
        "def add(x, y):\n    return Yes()"
    ),
    "generator": "def add(x, y):\n    yield x + y",
    "lambda": "def add(x, y):\n    return lambda *args: x + y",
    "sys_modules_tampering": (
        "import sys\n"
        "sys.modules['redraft_sandbox_plaindata'].to_tree = lambda value, depth=0: True\n"
        "sys.modules['builtins'].AssertionError = type('Quiet', (Exception,), {})\n"
        "def add(x, y):\n    return 0"
    ),
    "forged_frames": (
        "import json, os\n"
        "for message in [['ready'], *[['return', True]] * 200]:\n"
        "    payload = json.dumps(message).encode()\n"
        "    os.write(4, len(payload).to_bytes(4, 'big') + payload)\n"
        "os._exit(0)\n"
        "def add(x, y):\n    return x + y"
    ),
    "write_to_the_result_pipe": (
        "import os\ndef add(x, y):\n"
        "    for fd in range(3, 64):\n"
        "        try:\n            os.write(fd, b'\\x00\\x00\\x00\\x02{}')\n"
        "        except OSError:\n            pass\n"
        "    return 0"
    ),
    "read_the_tests": (
        # Passes if and only if it can find the hidden tests anywhere it can read.
        "import os\n"
        "MARKER = b'def ' + b'check(candidate)'  # not in this very file\n"
        "def add(x, y):\n"
        "    pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "    paths = ['/proc/%s/%s' % (p, n) for p in pids for n in ('cmdline', 'environ')]\n"
        "    paths += ['/proc/self/fd/%s' % fd for fd in os.listdir('/proc/self/fd')]\n"
        "    paths += [os.path.join(d, f) for root in ('/tmp', '.') for d, _, fs in os.walk(root) for f in fs]\n"
        "    for path in paths:\n"
        "        try:\n            text = open(path, 'rb').read(1_000_000)\n"
        "        except OSError:\n            continue\n"
        "        if MARKER in text:\n            return x + y\n"
        "    return 0"
    ),
    "signal_the_overseers": (
        "import os, signal\ndef add(x, y):\n"
        "    for pid in (os.getppid(), 1, -1):\n"
        "        try:\n            os.kill(pid, signal.SIGKILL)\n"
        "        except OSError:\n            pass\n"
        "    return 0"
    ),
    "close_the_pipes": "import os\ndef add(x, y):\n    os.close(3)\n    os.close(4)\n    return x + y",
    "sleep_past_the_deadline": "import time\ndef add(x, y):\n    time.sleep(60)\n    return x + y",
    "sleep_while_loading": "import time\ntime.sleep(60)\ndef add(x, y):\n    return x + y",
    "print_gigabytes": "def add(x, y):\n    for _ in range(2000):\n        print('x' * 1_000_000)\n    return x + y",
    "huge_value": "def add(x, y):\n    return [x + y] * 10**6",
    "deeply_nested_value": (
        "def add(x, y):\n    value = x + y\n    for _ in range(100_000):\n        value = [value]\n    return value"
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(ATTACKS))
def test_an_attack_on_the_harness_fails_the_feedback_and_the_grade(name: str) -> None:
    text = f"```python\n{ATTACKS[name]}\n```"
    checks = SCENARIO.check(TASK, text)
    grade = SCENARIO.grade(TASK, text)
    assert checks and not all(c.passed for c in checks), [c.detail for c in checks]
    assert grade is not None and not grade.passed and grade.score == 0.0, grade
    assert grade.detail and all(c.detail for c in checks)


def test_the_same_tricks_on_a_right_answer_still_pass() -> None:
    """The harness judges answers, not styles: printing, exiting late or odd imports do not fail a right one."""
    text = (
        "```python\nimport atexit, os, sys\natexit.register(os._exit, 3)\nprint('noise', file=sys.stderr)\n"
        "def add(x, y):\n    print('computing')\n    return x + y\n```"
    )
    assert all(c.passed for c in SCENARIO.check(TASK, text))
    grade = SCENARIO.grade(TASK, text)
    assert grade is not None and grade.passed
