"""cited_answer end to end: `redraft run cited_answer` on the session's Ray with the real embedded model.

The 135M model may well break the rules; what is asserted is what the run must do whatever it writes: a record
per task, the feedback's four verdicts on every candidate, the calls counted, and no grade (the scenario has no
program grade; a judge grades it by its rubric, after the loop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from redraft.backends.local import EMBEDDED_MODEL_FILE
from redraft.cli import main
from redraft.protocols.messages import Draft, Grade, Verification, iter_frames
from redraft.rundir import result_records, trace_bytes

pytestmark = [pytest.mark.ray, pytest.mark.model]


@pytest.mark.timeout(900)
def test_the_embedded_model_answers_cited_tasks_checked_by_the_rules_and_ungraded(
    ray_cluster: Any, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    main(["run", "cited_answer", "--limit", "2", "--samples", "1", "--max-rounds", "1", "--out", str(out)])
    records = result_records(out)
    assert sorted(r["task_id"] for r in records) == ["cited-000", "cited-001"]
    for record in records:
        assert record["error"] is None and record["stop_reason"] in ("threshold", "max_rounds")
        assert record["usage"]["calls"] >= 1 and record["usage"]["output_tokens"] > 0
        assert (record["grade"], record["graded_pass"]) == (None, None)
    trace = list(iter_frames(trace_bytes(out)))
    drafts = [m for m in trace if isinstance(m, Draft)]
    assert drafts and {d.model for d in drafts} == {EMBEDDED_MODEL_FILE}
    verdicts = [m for m in trace if isinstance(m, Verification) and m.stage is None]
    assert len(verdicts) >= len(records)
    assert all([c.name for c in v.checks] == ["length", "cited", "ids", "quotes"] for v in verdicts)
    assert not [m for m in trace if isinstance(m, Grade)]
