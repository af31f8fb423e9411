"""Read a run directory without loading it: records streamed, one task's frames at a time.

Records are read by the one rule of `redraft.rundir._results` (the writer's too):
record by record, a damaged line skipped and the records after it kept. Each record
bounds its task's frames by a byte range: one task is found by seeking, and a whole
run streamed with one task's frames in memory. A range is checked as it is read
(`redraft.rundir.frames.task_frames`: whole frames, the last the task's `Result`), so
a task whose frames are lost (a damaged or deleted trace) is said to be (`trace_of`
None, `TaskEntry.lost`), its result standing, and never shown another's frames.
Frames decode into the message Structs (`redraft.rundir.frames`), keeping what this
version does not know.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import msgspec

from redraft.errors import UserError, did_you_mean
from redraft.protocols.messages import Result
from redraft.rundir._blocks import BlockReader, Decoded
from redraft.rundir._index import lookup
from redraft.rundir._results import (
    TRACE_END,
    TRACE_START,
    TaskEntry,
    is_infrastructure_failure,
    latest_results,
    read_results,
)
from redraft.rundir._wire import check_wire
from redraft.rundir.frames import Frame, task_frames
from redraft.rundir.layout import MANIFEST, RESULTS, SUMMARY, TRACE, read_object
from redraft.rundir.summary import Summary


class RunReader:
    """A run directory opened for reading. `UserError` if ``root`` is not one, or a pre-release redraft's
    (`redraft.rundir._wire`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        if not root.is_dir():
            why = "not a directory" if root.exists() else "no such directory"
            raise UserError(f"{root} is not a run directory ({why})")
        if not (root / RESULTS).is_file():
            raise UserError(f"{root} is not a run directory (no {RESULTS})")
        check_wire(root)
        self._blocks = BlockReader(root)

    def manifest(self) -> dict[str, Any]:
        """``manifest.json`` as written (its ``config`` is the writer's, of whatever version), or {}."""
        return read_object(self.root / MANIFEST)

    def saved_summary(self) -> Summary | None:
        """``summary.json``, or None while a run has not finished one (or it does not read as a `Summary`)."""
        data = read_object(self.root / SUMMARY)
        if not data:
            return None
        try:
            return msgspec.convert(data, Summary)
        except msgspec.ValidationError:
            return None

    def entries(self, noting: Callable[[TaskEntry], None] | None = None) -> Iterator[TaskEntry]:
        """Every task's latest record, in trace order, with its frame range (see `latest_results`); ``noting`` is
        told every record before the first is yielded."""
        return latest_results(self.root, noting)

    def finished(self) -> Iterator[Result]:
        """The results of the tasks a resume skips: every task's latest record but the machinery's failures."""
        return (entry.result for entry in self.entries() if not is_infrastructure_failure(entry.result))

    def find(self, task_id: str) -> TaskEntry:
        """The entry of ``task_id``, found through the run's index (`redraft.rundir._index`) where it can say, else
        by reading the records; `UserError` naming a few known ids if there is none."""
        indexed = lookup(self.root, task_id)
        if indexed:
            return indexed[0]
        known: list[str] = []
        for entry in self.entries():
            if entry.task_id == task_id:
                return entry
            if len(known) < 5:
                known.append(entry.task_id)
        if not known:
            raise UserError(f"no task {task_id!r} in {self.root} (the run has no finished task)")
        near = did_you_mean(task_id, (entry.task_id for entry in self.entries()))  # a second pass, ids not kept
        raise UserError(f"no task {task_id!r} in {self.root} ({near}e.g. {', '.join(known)})")

    def frames(self, entry: TaskEntry, trace: IO[bytes] | None = None) -> list[Frame]:
        """The frames of one task, read by seeking to its byte range; none when they are lost (`trace_of`)."""
        return self.trace_of(entry, trace) or []

    def trace_of(self, entry: TaskEntry, trace: IO[bytes] | None = None) -> list[Frame] | None:
        """The frames of one task, read by seeking to its byte range (decompressed, if it is a block) and checked;
        None when they are lost."""
        if entry.lost:
            return None
        if trace is None:
            if not (self.root / TRACE).exists():
                return None
            with open(self.root / TRACE, "rb") as f:
                return self.trace_of(entry, f)
        trace.seek(entry.start)
        data = self._blocks.decode(trace.read(entry.end - entry.start))
        return None if data is None else task_frames(data, entry.task_id, trim=entry.guessed_start)

    def tasks(self) -> Iterator[tuple[TaskEntry, list[Frame]]]:
        """Every task with its frames, streamed: one task's frames in memory at a time. A task whose frames are
        lost comes with none, its entry marked `TaskEntry.lost`."""
        for entry, frames in self.sampled(lambda _: True):
            yield entry, frames or []

    def sampled(self, which: Callable[[int], bool]) -> Iterator[tuple[TaskEntry, list[Frame] | None]]:
        """Every task, streamed, with its frames when ``which`` (given the task's place, from 0) says to read them
        (else None): a long run's figures from some of its traces, every result counted."""
        trace_path = self.root / TRACE
        if not trace_path.exists():
            yield from (
                (dataclasses.replace(entry, lost=True), [] if which(i) else None)
                for i, entry in enumerate(self.entries())
            )
            return
        with open(trace_path, "rb") as trace:
            for i, entry in enumerate(self.entries()):
                if not which(i):
                    yield entry, None
                    continue
                found = self.trace_of(entry, trace)
                yield (entry, found) if found is not None else (dataclasses.replace(entry, lost=True), [])

    def count(self) -> int:
        """Lines in ``results.jsonl`` (a task's record each, but for damaged lines and a redone task's earlier
        one): what a long read will pass, counted without decoding."""
        lines = 0
        with open(self.root / RESULTS, "rb") as results:
            while chunk := results.read(1 << 20):
                lines += chunk.count(b"\n")
        return lines


def trace_for(root: Path, task_id: str) -> tuple[TaskEntry, list[Frame] | None]:
    """One task of the run at ``root``: its entry (its result, where its frames are) and its frames (None when
    they are lost), found through the run's index, not by reading the run. `UserError` if ``root`` is not a run
    directory or has no task ``task_id`` (naming a few it has)."""
    reader = RunReader(root)
    entry = reader.find(task_id)
    return entry, reader.trace_of(entry)


def trace_bytes(root: Path) -> bytes:
    """Every frame of a run's trace, back to back, decompressed: a small run read whole (a test's, an example's;
    `RunReader` streams a large one). `UserError` if a block does not decode."""
    with open(root / TRACE, "rb") as trace:
        blocks = Decoded(trace, BlockReader(root))
        data = b"".join(blocks)
        if not blocks.whole:
            raise UserError(f"{root / TRACE}: a block past byte {len(data)} of its frames does not decode")
    return data


def result_records(root: Path) -> list[dict[str, Any]]:
    """Every line of ``results.jsonl`` as written, with the fields a line leaves out at their defaults filled in:
    a small run's records whole, as plain JSON values (`RunReader` streams a large one, as `Result` Structs)."""
    records = []
    for entry in read_results(root):
        full: dict[str, Any] = msgspec.to_builtins(entry.result)
        del full["kind"], full["v"]
        records.append(full | entry.extra | {TRACE_START: entry.start, TRACE_END: entry.end})
    return records
