"""A run's estimate before it starts: the tasks it has left and what its finished ones cost, for
`redraft.engine.estimate`. Reads the run directory, writes nothing, starts no Ray and calls no model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from redraft.engine.estimate import SAMPLE, Done, Estimate, estimate_tasks
from redraft.engine.resolution import ResolvedRun
from redraft.rundir import RunReader
from redraft.rundir.layout import RESULTS
from redraft.rundir.store import resumable


def estimate_left(run: ResolvedRun, manifest: dict[str, Any], *, sample: int = SAMPLE) -> Estimate:
    """The estimate of the tasks ``run``'s directory has not finished; `UserError` if it holds another
    configuration's run (which the run would refuse)."""
    ids, done = finished(run.out, manifest)
    left = (task for task in run.tasks() if task.task_id not in ids)
    return estimate_tasks(run, left, done=done, sample=sample)


def finished(out: Path, manifest: dict[str, Any]) -> tuple[set[str], Done]:
    """The tasks a resume of ``out`` skips, and what they spent (none for a new run); streamed."""
    ids: set[str] = set()
    done = Done()
    if resumable(out, manifest) is None or not (out / RESULTS).is_file():
        return ids, done
    for result in RunReader(out).finished():
        ids.add(result.task_id)
        done = done.plus(result)
    return ids, done
