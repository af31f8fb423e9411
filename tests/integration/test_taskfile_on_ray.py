"""A task file with a user's check, run from the CLI on Ray: the check runs in the verifier actors.

The task file format and the check contract: tests/unit/scenarios/test_taskfile.py.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from redraft.cli import main
from redraft.protocols.messages import Verification, iter_frames
from redraft.rundir import result_records, trace_bytes
from tests.support.task_files import CHECK, GOOD, write_lines


@pytest.mark.ray
def test_a_task_file_with_a_user_check_runs_from_the_cli_in_verifier_actors(
    ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = write_lines(tmp_path / "tasks.jsonl", *GOOD)
    out = tmp_path / "run"
    argv = ["run", "--tasks", str(tasks), "--check", CHECK, "--model", "scripted:tests.support.replies:always_seven"]
    argv += ["--strategy", "none", "--samples", "1", "--max-rounds", "1", "--out", str(out)]
    main(argv)  # returns on success: a check that raises or misbehaves on some tasks ends them, not the run
    assert "feedback pass rate, refined" in capsys.readouterr().out
    records = {r["task_id"]: r for r in result_records(out)}
    assert {k: (r["passed"], r["error_type"]) for k, r in records.items()} == {
        "right": (True, None),
        "wrong": (False, None),
        "raises": (False, "CheckError"),  # the check's failure ends its task; it is never the drafter's feedback
        "wrong-type": (False, "CheckError"),
        "out-of-range": (False, "CheckError"),
    }
    assert records["raises"]["error"] == f"CheckError: the check of check:{CHECK} raised KeyError: 'answer'"
    assert records["raises"]["error_where"].startswith("check_modules.py:") and records["raises"]["traceback"]
    broken = f"CheckError: the check {CHECK} returned 'looks fine to me'; it must return (score, detail)"
    assert records["wrong-type"]["error"].startswith(broken)
    verifications = [m for m in iter_frames(trace_bytes(out)) if isinstance(m, Verification)]
    assert {v.task_id: v.checks[0].detail for v in verifications} == {
        "right": "correct",
        "wrong": "the answer '7' is wrong",
    }
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["scenario"] == f"check:{CHECK}"
    assert manifest["identity"]["tasks"]["sha256"] == hashlib.sha256(tasks.read_bytes()).hexdigest()
    # Resuming with another file in the same directory is refused before anything runs.
    write_lines(tasks, *GOOD, {"id": "more", "prompt": "What is 2 + 5?", "reference": {"answer": "7"}})
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "holds a run with another configuration" in capsys.readouterr().err
    assert msgspec.json.decode((out / "manifest.json").read_bytes())["fingerprint"] == manifest["fingerprint"]
