"""Processes and work directories a sandbox leaves behind, found the way the sandbox names them.

Every sandbox fork carries its work directory in its environment (``HOME`` and ``TMPDIR``; never on its
command line, which the candidate could read of its keeper), and a work directory's name starts with
``workdirs.PREFIX`` and the caller's pid: that is how a test proves nothing outlived a run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from redraft.sandbox import _workdirs as workdirs


def leftover_processes(marker: str, wait_s: float = 2.0) -> list[str]:
    """Processes whose environment holds ``marker`` (every sandbox fork carries its work dir there)."""
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes()
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if marker.encode() in environ:
                state = next(line for line in status.splitlines() if line.startswith("State:"))
                found.append(f"{pid} {state}")
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def wait_for_sandbox(caller: subprocess.Popen[str]) -> str:
    """Waits until the caller's launcher, keeper and candidate all run; returns their environment's marker."""
    marker = f"{workdirs.PREFIX}{caller.pid}-"
    deadline = time.monotonic() + 30
    while len(leftover_processes(marker, wait_s=0)) < 3:
        assert caller.poll() is None, "the caller ended before its sandbox started"
        assert time.monotonic() < deadline, "the sandbox did not start within 30 s"
        time.sleep(0.05)
    return marker


def workdirs_of(caller_pid: int) -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob(f"{workdirs.PREFIX}{caller_pid}-*"))


@contextlib.contextmanager
def private_tempdir() -> Iterator[Path]:
    """A temporary directory of the test's own, as open as the system's (sticky, writable by the sandbox's
    user), made every process's temporary directory (``TMPDIR``, and this one's ``tempfile``) while the block
    runs: the work directories a test leaves behind on purpose are out of the reach of any other test run's
    verifier, which sweeps the system's temporary directory of dead callers' work directories at its start."""
    base = Path(tempfile.mkdtemp(prefix="redraft-test-tmp-"))
    base.chmod(0o1777)
    before, saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = str(base), str(base)
    try:
        yield base
    finally:
        tempfile.tempdir = saved
        if before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before
        shutil.rmtree(base, ignore_errors=True)
