"""``results.jsonl``: how a task's line is written, and the one rule for reading the lines back.

A line is a `Result` as a JSON object, without its ``kind`` and ``v``, plus
``trace_end``: the trace offset just past the task's frames. Lines are in the
order the tasks' frames sit in the trace, so a task's frames are the byte range
``[previous line's trace_end, its trace_end)``.

The rule, kept by the writer's recovery and by every reader alike (`read_results`):
the run's records are the lines before the first line that

- has no newline at its end (torn: its writer was killed mid-line, or is still writing),
- is not a JSON object that validates as a `Result`, or
- has a ``trace_end`` past the trace's end (its frames never reached the disk: a machine crash).

That line and every line after it are not part of the run: the writer cuts them
off when it opens the directory (their tasks are redone), a reader stops there.

A record whose ``error_type`` is the machinery's failure (`redraft.errors.recorded_as_machinery`,
written by versions that did not redo such tasks) is not a finished task: a
resume redoes it and appends a new line, and every reader takes a task's later
line (`latest_results`; the writer's recovery keeps both lines on disk).

Records decode into the `Result` Struct, so older and newer lines both read: the
tag may be absent, fields this version does not know are kept aside in
`TaskEntry.extra` (never lost), and fields added since a line was written take
their defaults.

Legacy rule, applied here and nowhere else: a line written before
``Result.error_type`` existed says its cause only in words, ``"Cause: message"``
in ``error``; its ``error_type`` is the text before the first colon.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from redraft.errors import recorded_as_machinery
from redraft.protocols.messages import Result
from redraft.rundir.layout import RESULTS, trace_size

TRACE_END = "trace_end"
_KNOWN = frozenset(Result.__struct_fields__) | {"kind", TRACE_END}


@dataclass(frozen=True, slots=True)
class TaskEntry:
    """One finished task: its result, where its frames are in the trace, and where its line ends."""

    result: Result
    extra: dict[str, Any]
    """Fields of the line this version does not know (a newer writer's), ``trace_end`` aside."""
    start: int
    """Trace offset of the task's first frame."""
    end: int
    """Trace offset just past its last frame (the line's ``trace_end``)."""
    line_end: int
    """Offset in ``results.jsonl`` just past the task's line."""

    @property
    def task_id(self) -> str:
        return self.result.task_id


def result_line(result: Result, trace_end: int) -> bytes:
    """The ``results.jsonl`` line of one task, newline included."""
    record: dict[str, Any] = msgspec.to_builtins(result)
    del record["kind"], record["v"]
    record[TRACE_END] = trace_end
    return msgspec.json.encode(record) + b"\n"


def read_results(root: Path) -> Iterator[TaskEntry]:
    """The run's records by the module's rule, streamed (one line in memory at a time)."""
    path = root / RESULTS
    if not path.exists():
        return
    size = trace_size(root)
    start = line_end = 0
    with open(path, "rb") as f:
        for line in f:
            entry = _entry(line, start, line_end + len(line), size)
            if entry is None:
                return
            yield entry
            start, line_end = entry.end, entry.line_end


def latest_results(root: Path) -> Iterator[TaskEntry]:
    """Every task's latest record, in trace order: `read_results` without the records a resume redid.

    Two passes over the file; only the pending infrastructure failures are held in
    memory between them, so memory stays flat however long the run.
    """
    replaced = superseded(entry.result for entry in read_results(root))
    for index, entry in enumerate(read_results(root)):
        if index not in replaced:
            yield entry


def is_infrastructure_failure(result: Result) -> bool:
    """Whether a record holds the machinery's failure rather than the task's result (redone on resume).

    Besides the machinery's own causes, a poison task whose every attempt found a backend unreachable: such a
    record was written by count, before a task was blamed only on evidence that the endpoint answered others.
    """
    if not result.error:
        return False
    unreachable = bool(result.retried_for) and set(result.retried_for) == {"BackendUnavailableError"}
    return recorded_as_machinery(result.error_type) or (result.error_type == "PoisonTaskError" and unreachable)


def superseded(results: Iterable[Result]) -> set[int]:
    """Indices of the records a later record of the same task replaces (the earlier failed for the machinery)."""
    pending: dict[str, int] = {}
    replaced: set[int] = set()
    for index, result in enumerate(results):
        if result.task_id in pending:
            replaced.add(pending.pop(result.task_id))
        if is_infrastructure_failure(result):
            pending[result.task_id] = index
    return replaced


def _entry(line: bytes, start: int, line_end: int, trace_size: int) -> TaskEntry | None:
    """The entry of one line, or None if the line ends the run's records."""
    if not line.endswith(b"\n"):
        return None
    try:
        record = msgspec.json.decode(line)
        if not isinstance(record, dict):
            return None
        result = decode_record(record)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    end = record.get(TRACE_END, start)
    if not isinstance(end, int) or end > trace_size:
        return None
    extra = {k: v for k, v in record.items() if k not in _KNOWN}
    return TaskEntry(result=result, extra=extra, start=start, end=end, line_end=line_end)


def decode_record(record: dict[str, Any]) -> Result:
    """A record as a `Result` (`msgspec.ValidationError` if it is not one), with the legacy rule applied."""
    result = msgspec.convert(record, Result)
    if result.error and result.error_type is None:
        result = msgspec.structs.replace(result, error_type=result.error.split(":", 1)[0])
    return result
