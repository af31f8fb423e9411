"""``tasks.index``: where each task's line is in ``results.jsonl``, so one task is found without reading them all.

The index is 16 bytes a record, in the file's order: the first 8 bytes of the BLAKE2b
digest of the task's id, then the byte offset of its line (little-endian). The writer
appends an entry after each line (`redraft.rundir.store`), and on open makes the index
true of the file again (`opened`): anew when its recovery rewrote ``results.jsonl`` or
the index's last entry is not where it says, else extended by the lines past its last
entry (a writer killed between the two writes, an older version's appends).

The index only says where to look: a reader (`lookup`) reads each line it points at by
the one rule (`redraft.rundir._results`), and the lines past its last entry too. When a
line is not where the index says (a file rewritten by a version that kept no index), or
a line has no ``trace_start`` (an older writer's, whose range the lines before it
bound), it answers None and the caller reads the whole file, as without an index. An
entry found this way has no line number (`TaskEntry.line` 0): counting lines is what
the index saves.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import msgspec

from redraft.jsonlines import Line, Refused, scan
from redraft.rundir._results import (
    TRACE_START,
    TaskEntry,
    decode_line,
    entry_of,
    manifest_run,
    superseded,
)
from redraft.rundir.layout import RESULTS, trace_size

INDEX = "tasks.index"
"""The run directory's file holding the index."""
ENTRY = 16
"""Bytes an entry."""


class _Named(msgspec.Struct):
    task_id: str


_NAMED = msgspec.json.Decoder(_Named)


def key(task_id: str) -> bytes:
    """The first 8 bytes of a task id's BLAKE2b digest: how the index names it."""
    return hashlib.blake2b(task_id.encode(), digest_size=8).digest()


def entry(task_id: str, offset: int) -> bytes:
    """The index's entry of the line of ``task_id`` at ``offset``."""
    return key(task_id) + offset.to_bytes(8, "little")


def opened(root: Path, rewritten: bool) -> IO[bytes]:
    """The index of the run directory at ``root`` made true of its ``results.jsonl`` (``rewritten``: by a
    recovery, so made anew), open for appending."""
    path = root / INDEX
    entries, covered = (0, 0) if rewritten else (_covered(root) or (0, 0))
    with open(path, "r+b" if path.exists() else "wb") as index:
        index.truncate(entries * ENTRY)
        index.seek(0, 2)
        for offset, task_id in _named_lines(root / RESULTS, covered):
            index.write(entry(task_id, offset))
    return open(path, "ab")


def lookup(root: Path, task_id: str) -> list[TaskEntry] | None:
    """The records of ``task_id`` a reader takes (a later line replacing an earlier one the machinery failed:
    `redraft.rundir._results.superseded`), found through the index and read by the one rule; None when the
    index cannot say (see the module docstring)."""
    covered = _covered(root)
    if covered is None:
        return None
    with open(root / INDEX, "rb") as index:
        data = index.read(covered[0] * ENTRY)
    wanted, offsets, at = key(task_id), [], 0
    while (at := data.find(wanted, at)) >= 0:
        if at % ENTRY == 0:
            offsets.append(int.from_bytes(data[at + 8 : at + ENTRY], "little"))
        at += 1
    found: list[TaskEntry] = []
    run, size = manifest_run(root), trace_size(root)
    with open(root / RESULTS, "rb") as results:
        for offset in offsets:
            results.seek(max(offset - 1, 0))
            data = results.read(offset - results.tell()) + results.readline()  # the newline before it, and it
            if not data.startswith(b"\n") and offset:
                return None
            record = _record(data.removeprefix(b"\n") if offset else data, offset, run, size)
            if record is not None and record.task_id != task_id:
                return None  # not the line the index made this entry for: it is untrue of the file
            found.extend([] if record is None else [record])
    for item in scan(root / RESULTS, bytes, offset=covered[1]):  # lines past the last entry
        record = _record(item.data, item.offset, run, size) if isinstance(item, Line) else None
        if record is not None and record.task_id == task_id:
            found.append(record)
    if any(e.guessed_start for e in found):  # a line without its range's start: the lines before it bound it
        return None
    replaced = superseded(e.result for e in found)
    return [e for i, e in enumerate(found) if i not in replaced]


def _record(data: bytes, offset: int, run: str | None, size: int) -> TaskEntry | None:
    """The record in the line ``data`` at ``offset``, if it is one by the rule (a reader skips any other)."""
    if not data.endswith(b"\n"):
        return None
    try:
        record = decode_line(data, run)
    except (msgspec.DecodeError, msgspec.ValidationError, Refused, RecursionError):
        return None
    # a line without ``trace_start`` is marked a guess (`TaskEntry.guessed_start`): the caller reads the whole file
    return entry_of(Line(record, 0, offset, data), previous_end=0, skipped=TRACE_START not in record[0], size=size)


def _covered(root: Path) -> tuple[int, int] | None:
    """The index's whole entries, and where in ``results.jsonl`` its last entry's line ends ((0, 0): an empty
    index); None when there is no index, or its last entry is not its task's whole line."""
    try:
        with open(root / INDEX, "rb") as index:
            entries = index.seek(0, 2) // ENTRY
            if not entries:
                return 0, 0
            index.seek((entries - 1) * ENTRY)
            last = index.read(ENTRY)
        with open(root / RESULTS, "rb") as results:
            offset = int.from_bytes(last[8:], "little")
            results.seek(offset)
            line = results.readline()
    except FileNotFoundError:
        return None
    named = _named(line)
    return (
        (entries, offset + len(line)) if named is not None and line.endswith(b"\n") and key(named) == last[:8] else None
    )


def _named_lines(path: Path, offset: int) -> Iterator[tuple[int, str]]:
    """Each whole line of ``path`` from ``offset`` that names a task: where it begins, and the task."""
    try:
        results = open(path, "rb")  # noqa: SIM115 - closed below, once the generator is done
    except FileNotFoundError:
        return
    with results:
        results.seek(offset)
        for data in results:
            if data.endswith(b"\n") and (task_id := _named(data)) is not None:
                yield offset, task_id
            offset += len(data)


def _named(line: bytes) -> str | None:
    try:
        return _NAMED.decode(line).task_id
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
