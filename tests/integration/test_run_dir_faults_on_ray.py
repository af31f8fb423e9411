"""`redraft run` when its directory fails it: a full disk ends the run in one line (exit 1) and the same
command resumes it to the results an undisturbed run has; a second run on one --out is refused while the first
writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from redraft.cli import main
from redraft.rundir import result_records
from tests.support.disks import remount, small_disk
from tests.support.paths import REPO_ROOT

ARGV = ["run", "arithmetic", "--model", "scripted:tests.support.replies:always_seven", "--strategy", "none"]
ARGV += ["--samples", "1", "--max-rounds", "1", "--limit", "30", "--no-cache"]


def exit_code(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as ended:
        return int(ended.code or 0)
    return 0


def results(out: Path) -> dict[str, Any]:
    lines = result_records(out)
    assert len(lines) == len({r["task_id"] for r in lines})  # each task once
    return {r["task_id"]: (r["answer"], r["passed"], r["usage"]["calls"]) for r in lines}


@pytest.mark.ray
def test_a_full_disk_ends_the_run_in_one_line_and_the_rerun_resumes_it(
    ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_code([*ARGV, "--out", str(tmp_path / "clean")]) == 0
    capsys.readouterr()
    with small_disk(tmp_path / "disk", "24k") as disk:
        out = disk / "run"
        assert exit_code([*ARGV, "--out", str(out)]) == 1
        err = capsys.readouterr().err
        failed = [line for line in err.splitlines() if line.startswith("redraft: failed:")]
        assert failed == [line for line in failed if f"cannot write in the run directory {out}" in line]
        assert len(failed) == 1 and "Traceback" not in err and "rerun the same command to resume" in failed[0]
        partial = results(out)
        assert 0 < len(partial) < 30
        remount(disk, "size=4m")
        assert exit_code([*ARGV, "--out", str(out)]) == 0
        assert results(out) == results(tmp_path / "clean")


HOLDER = """
import sys
from pathlib import Path
from redraft.rundir import result_records
from redraft.rundir.lock import hold
hold(Path(sys.argv[1]))
print("held", flush=True)
sys.stdin.read()
"""


def test_a_second_run_on_one_out_is_refused_in_one_line_naming_the_first(tmp_path: Path) -> None:
    """Refused before anything starts (no Ray, no model): the first run's lock names it."""
    out = tmp_path / "run"
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    first = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert first.stdout is not None and first.stdout.readline() == "held\n"
        second = subprocess.run(
            [sys.executable, "-m", "redraft.cli", *ARGV, "--out", str(out)],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO_ROOT,
            timeout=600,
        )
        assert second.returncode == 2
        assert second.stderr.startswith(f"redraft: error: --out {out} is being written by pid {first.pid} on host ")
        assert second.stderr.count("\n") == 1 and not (out / "results.jsonl").exists()
    finally:
        first.kill()
        first.wait()
