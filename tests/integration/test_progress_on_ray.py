"""The progress line shows a run alive before its tasks finish, from a real run on the session's Ray with a
scripted model: calls and tokens so far, the tasks in flight by round, an ETA from calls. Off a terminal, the
heartbeat carries it; here it is made to beat on every turn of the dispatch loop."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from redraft.actors import _live
from redraft.cli import main
from redraft.cli._progress import RunProgress
from redraft.rundir.layout import LIVE, write_json

pytestmark = pytest.mark.ray

BEAT = re.compile(
    r"refining: (\d+)/4 tasks done, \S+, (\d+) calls? and ([\d,]+) tokens? so far, "
    r"in flight: (.*?)(?:, ETA (\S+) from calls)?$"
)


def test_the_heartbeat_counts_calls_and_rounds_before_the_tasks_finish(
    ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(RunProgress, "HEARTBEAT_S", 0.0)
    written: list[dict[str, Any]] = []
    monkeypatch.setattr(_live, "EVERY_S", 0.0)
    monkeypatch.setattr(_live, "write_json", lambda path, state: (written.append(state), write_json(path, state)))
    argv = ["run", "arithmetic", "--model", "scripted:tests.support.replies:always_seven", "--limit", "4"]
    main([*argv, "--samples", "2", "--max-rounds", "2", "--out", str(tmp_path / "run")])
    beats = [m for line in capsys.readouterr().err.splitlines() if (m := BEAT.match(line))]
    assert beats, "no heartbeat"
    # A task in its second round is out while calls of its first have been counted: life before any end.
    second = [m for m in beats if "in round 2" in m.group(4)]
    assert second and all(int(m.group(2)) > 0 and int(m.group(1)) < 4 for m in second)
    assert any(m.group(5) for m in beats if int(m.group(2)) > 0)  # an ETA from calls once a call ended
    # The same, written beside the run's records for a viewer: each task out by id with its round; gone at the end.
    assert any(r is not None and r >= 1 for state in written for r in state["tasks"].values())
    assert all(set(state["tasks"]) <= {f"arithmetic-{n:04d}" for n in range(4)} for state in written)
    assert not (tmp_path / "run" / LIVE).exists()
