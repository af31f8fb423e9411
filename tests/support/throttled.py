"""Run a Python script in a process held to a fraction of one core (a cgroup v1 ``cpu`` quota), as a busy
machine holds the embedded model: `throttled_run` returns what the script printed; None when this machine
gives no writable cgroup (not root, or no ``cpu`` controller), for the caller to skip."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from tests.support.paths import REPO_ROOT

CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000


def throttled_run(script: str, *, share: float, timeout_s: float = 600.0) -> subprocess.CompletedProcess[str] | None:
    """``script`` run by this interpreter inside a new cgroup whose CPU quota is ``share`` of one core."""
    group = CPU_CGROUPS / f"redraft-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
    except OSError:
        return None
    try:
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(int(PERIOD_US * share)))
        enter = f"open({str(group / 'cgroup.procs')!r}, 'w').write(str(__import__('os').getpid()))\n"
        return subprocess.run(
            [sys.executable, "-c", enter + script],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
    finally:
        for _ in range(50):  # the group can be removed once its process is gone
            try:
                group.rmdir()
                break
            except OSError:
                import time

                time.sleep(0.1)
