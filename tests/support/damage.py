"""Damage done to a run directory, as a crashed machine or a careless operator does: for the tests that resume one
(tests/integration/test_resume_damaged.py, test_batch_run.py) and `benchmarks/chaos.py`."""

from __future__ import annotations

import json
from pathlib import Path

DAMAGES = ("a corrupt middle line", "trace deleted", "a garbage trace")


def damage(out: Path, how: str) -> list[str]:
    """Damage the run directory ``out`` (see `DAMAGES`); the ids of the tasks whose results it took."""
    results = out / "results.jsonl"
    match how:
        case "a corrupt middle line":  # the 4th line: a bit flipped in its JSON, the 16 lines after it whole
            lines = results.read_bytes().splitlines(keepends=True)
            spoilt = len(lines) // 5
            task = json.loads(lines[spoilt])["task_id"]
            lines[spoilt] = lines[spoilt].replace(b'"task_id"', b'"task_id\x00', 1)
            results.write_bytes(b"".join(lines))
            return [task]
        case "trace deleted":
            (out / "trace.msgpack").unlink()
            return []
        case "a garbage trace":  # 12 bytes where the trace was
            (out / "trace.msgpack").write_bytes(b"not a trace!")
            return []
    raise ValueError(f"no damage {how!r}: one of {DAMAGES}")


def tear_journal(out: Path) -> None:
    """Cut the last line of the batch journal short, as a collector killed while writing it leaves it."""
    journal = out / "batches.jsonl"
    journal.write_bytes(journal.read_bytes()[:-30])
