"""``results.jsonl``: how a task's line is written, and the one rule for reading the lines back.

A line is a `Result` as a JSON object, without its ``kind`` and ``v``, plus

- ``trace_start`` and ``trace_end``: the byte range of the task's frames in the trace.
  Lines of older writers have no ``trace_start``: their range begins where the line
  before them ended theirs;
- ``run``: the run directory's id (its manifest's ``run_uid``); absent from older lines;
- ``trace_lost``: true when the task's frames were lost (a damaged or deleted trace):
  its result stands, its range is empty.

The rule, the writer's and every reader's (`read_results`), is record by record
(`redraft.jsonlines`): a line is a record when it is whole (a newline ends it),
validates as a `Result` with offsets for its range, and is not another run's (a
``run`` that is not the manifest's). Any other line is skipped by readers and set
aside by the writer (`redraft.rundir._recovery`); the records after it are kept.

A line leaves out every field whose value is the field's default (an empty error, a
zero count), and records decode into the `Result` Struct, so older and newer lines
both read: the tag may be absent, fields this version does not know are kept aside in
`TaskEntry.extra` (never lost), and fields added since a line was written take
their defaults.

See docs/architecture.md, section "Results lines: lost frames and the machinery's failures".
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import msgspec

from redraft.errors import recorded_as_machinery
from redraft.jsonlines import Line, Refused, SetAside, scan
from redraft.protocols.messages import Result
from redraft.rundir.layout import MANIFEST, RESULTS, RUN_UID, read_object, trace_size

TRACE_START, TRACE_END, TRACE_LOST, RUN = "trace_start", "trace_end", "trace_lost", "run"
_KNOWN = frozenset(Result.__struct_fields__) | {"kind", TRACE_START, TRACE_END, TRACE_LOST, RUN}


@dataclass(frozen=True, slots=True)
class TaskEntry:
    """One finished task: its result, and where its frames are in the trace."""

    result: Result
    extra: dict[str, Any]
    """Fields of the line this version does not know (a newer writer's), the range and the run aside."""
    start: int
    """Trace offset of the task's first frame."""
    end: int
    """Trace offset just past its last frame (the line's ``trace_end``)."""
    line: int = 0
    """Its line in ``results.jsonl`` (1 for the first)."""
    lost: bool = False
    """Its frames are lost (the line says so, or its range lies past the trace's end); its result stands."""
    marked_lost: bool = False
    """Its line says so (``trace_lost``): a recovery found them lost before."""
    guessed_start: bool = False
    """An older line (no ``trace_start``) after a line that was skipped: its range begins where the last record
    before the skipped line ended, and may hold the skipped task's frames before its own."""

    @property
    def task_id(self) -> str:
        return self.result.task_id


def result_line(result: Result, start: int, end: int, run: str | None, *, lost: bool = False) -> bytes:
    """The ``results.jsonl`` line of one task, newline included: its fields but those at their defaults."""
    record = _set_fields(result)
    record.pop("kind", None), record.pop("v", None)
    record[TRACE_START], record[TRACE_END] = start, end
    if run:
        record[RUN] = run
    if lost:
        record[TRACE_LOST] = True
    return msgspec.json.encode(record) + b"\n"


def read_results(root: Path) -> Iterator[TaskEntry]:
    """The run's records by the module's rule, streamed (one line in memory at a time)."""
    return (item for item in scan_results(root) if isinstance(item, TaskEntry))


def scan_results(root: Path, after: After | None = None) -> Iterator[TaskEntry | SetAside]:
    """Every line of ``results.jsonl``: a record, or a line that is not one (and why); those ``after`` the lines
    a reader has read already, when given."""
    after = after or After()
    size, previous_end, skipped = trace_size(root), after.previous_end, False
    for item in scan(root / RESULTS, line_decoder(root), offset=after.offset, number=after.number):
        if isinstance(item, SetAside):
            skipped = True
            yield item
            continue
        entry = entry_of(item, previous_end, skipped, size)
        previous_end, skipped = entry.end, False
        yield entry


@dataclass(frozen=True)
class After:
    """Where a scan of ``results.jsonl`` goes on from: a line's end, its number, and its record's range's end."""

    offset: int = 0
    number: int = 0
    previous_end: int = 0


class Outcome(Protocol):
    """What tells a task done from one the machinery failed: a `Result`'s fields, or a record's digest's."""

    @property
    def error(self) -> str | None: ...
    @property
    def error_type(self) -> str | None: ...
    @property
    def retried_for(self) -> list[str]: ...


def latest_results(root: Path, noting: Callable[[TaskEntry], None] | None = None) -> Iterator[TaskEntry]:
    """Every task's latest record, in trace order: `read_results` without the records a resume redid.

    Two passes over the file; only the pending infrastructure failures are held in
    memory between them, so memory stays flat however long the run. ``noting`` is told
    every record in the first pass, which ends before the first record is yielded (what
    a reader must know of them all before it writes one: a table's columns).
    """
    first = read_results(root)
    replaced = superseded(_noted(entry, noting).result for entry in first)
    for index, entry in enumerate(read_results(root)):
        if index not in replaced:
            yield entry


def _noted(entry: TaskEntry, noting: Callable[[TaskEntry], None] | None) -> TaskEntry:
    if noting is not None:
        noting(entry)
    return entry


def is_infrastructure_failure(result: Outcome) -> bool:
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


def _set_fields(struct: msgspec.Struct) -> dict[str, Any]:
    """A Struct's fields as builtins, leaving out each one at its default (a nested Struct's likewise)."""
    record: dict[str, Any] = msgspec.to_builtins(struct)
    _pruner(type(struct))(record)
    return record


_REQUIRED = object()
"""A field with no default: always written."""
Pruner = Callable[[dict[str, Any]], None]


@functools.cache
def _pruner(kind: type[msgspec.Struct]) -> Pruner:
    """What deletes, from a ``kind`` as builtins, each field at its default: its own, a nested Struct's, and those
    of the Structs a mapping holds (a role's usage)."""
    plan: list[tuple[str, Any, Pruner | None, bool]] = []
    info = msgspec.inspect.type_info(kind)
    assert isinstance(info, msgspec.inspect.StructType)
    for field in info.fields:
        default = _REQUIRED
        if field.default is not msgspec.NODEFAULT:
            default = msgspec.to_builtins(field.default)
        elif field.default_factory is not msgspec.NODEFAULT:
            default = msgspec.to_builtins(field.default_factory())
        inner, mapping = field.type, isinstance(field.type, msgspec.inspect.DictType)
        if isinstance(inner, msgspec.inspect.DictType):
            inner = inner.value_type
        nested = _pruner(inner.cls) if isinstance(inner, msgspec.inspect.StructType) else None
        plan.append((field.encode_name, default, nested, mapping))

    def prune(record: dict[str, Any]) -> None:
        for name, default, nested, mapping in plan:
            value = record.get(name)
            if nested is not None and isinstance(value, dict):
                for inner_value in value.values() if mapping else (value,):
                    if isinstance(inner_value, dict):
                        nested(inner_value)
            if default is not _REQUIRED and value == default:
                del record[name]

    return prune


Record = tuple[dict[str, Any], Result]
"""A line's fields as written, and its `Result`."""


def line_decoder(root: Path) -> Callable[[bytes], Record]:
    """How the lines of the run directory at ``root`` decode: as `decode_line`, for its manifest's run."""
    run = manifest_run(root)
    return lambda data: decode_line(data, run)


def manifest_run(root: Path) -> str | None:
    """The run id of the directory's manifest (None: a manifest without one, or none)."""
    return str(read_object(root / MANIFEST).get(RUN_UID) or "") or None


def decode_line(data: bytes, run: str | None) -> Record:
    """A line's fields and its `Result`; `msgspec.DecodeError` if it is not JSON, `msgspec.ValidationError` if
    it is not a task's line, `Refused` if it is another run's (a line without a run is an older writer's)."""
    record = msgspec.json.decode(data)
    if not isinstance(record, dict):
        raise msgspec.ValidationError("a task's line is a JSON object")
    result = decode_record(record)
    for key in (TRACE_START, TRACE_END):
        offset = record.get(key, 0)
        if type(offset) is not int or offset < 0:
            raise msgspec.ValidationError(f"`{key}` is not an offset")
    if run is not None and record.get(RUN) not in (None, run):
        raise Refused("another run", f"run {record.get(RUN)}, not this directory's {run}")
    return record, result


def entry_of(line: Line[Record], previous_end: int, skipped: bool, size: int) -> TaskEntry:
    """A record's entry: its range (an older line's begins at ``previous_end``, after a line ``skipped`` a guess),
    lost when the line says so or the range lies past the trace's ``size``."""
    record, result = line.record
    explicit: int | None = record.get(TRACE_START)  # offsets, if there (`decode_line`)
    start = explicit if explicit is not None else previous_end
    end: int = record.get(TRACE_END, start)
    marked = record.get(TRACE_LOST) is True
    lost = marked or end > size or start > end
    extra = {k: v for k, v in record.items() if k not in _KNOWN}
    return TaskEntry(
        result=result,
        extra=extra,
        start=start,
        end=end,
        line=line.number,
        lost=lost,
        marked_lost=marked,
        guessed_start=skipped and explicit is None,
    )


def decode_record(record: dict[str, Any]) -> Result:
    """A record as a `Result` (`msgspec.ValidationError` if it is not one)."""
    return msgspec.convert(record, Result)
