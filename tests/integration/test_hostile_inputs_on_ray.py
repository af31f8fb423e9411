"""Nothing lost to a refused task file: once its bad line is fixed, every task of it runs, on Ray.

The hostile task files and flags themselves, each refused before anything starts:
tests/unit/adversarial/test_hostile_inputs.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from redraft.cli import main
from redraft.rundir import result_records
from tests.support.refusals import GOOD, SCRIPTED, refused


@pytest.mark.ray
def test_after_a_refused_file_is_fixed_every_task_runs(
    ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    lines = [GOOD % 1, '{"id": "bad", "prompt": "x\\ud800", "reference": {"answer": 7}}', GOOD % 3]
    tasks.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    argv = ["run", "arithmetic", "--tasks", str(tasks), *SCRIPTED, "--strategy", "none", "--samples", "1"]
    argv += ["--out", str(out)]
    assert "line 2: prompt: holds a lone surrogate" in refused(argv, capsys)
    assert not out.exists()
    tasks.write_text("\n".join([GOOD % 1, GOOD % 2, GOOD % 3]) + "\n")
    main(argv)
    records = result_records(out)
    assert sorted(r["task_id"] for r in records) == ["good-1", "good-2", "good-3"]
    assert all(r["error"] is None for r in records)
