"""What a resume keeps of a run directory, record by record, and what it sets aside (the writer's, on open).

A torn write loses the torn record only (SQLite's and Postgres's promise), and a lost
trace costs the trace of the tasks it held, never their results:

- a line that is not a record is moved to ``results.jsonl.damaged``, the records after it kept;
- a record whose frames are gone keeps its result (``trace_lost``), or with ``redo_untraced`` is redone;
- the trace is cut past the last record whose frames are whole; what is cut is set aside when the directory
  was damaged or the cut holds more than one task, and each file says in one line what it set aside.

See docs/architecture.md, section "What a resume keeps of a damaged directory".
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import msgpack
import msgspec

from redraft.jsonlines import Line, Recovery, SetAside, damaged_path, replace, scan
from redraft.protocols.messages import Usage
from redraft.rundir._blocks import BlockReader, Decoded
from redraft.rundir._prefix import Prefix, digested, trusted
from redraft.rundir._results import (
    TRACE_END,
    TRACE_LOST,
    TRACE_START,
    Outcome,
    Record,
    TaskEntry,
    is_infrastructure_failure,
    line_decoder,
    manifest_run,
    scan_results,
)
from redraft.rundir.frames import task_span
from redraft.rundir.layout import RESULTS, TRACE

_CHUNK = 1 << 20


@dataclass
class Recovered:
    """What the records of a run directory hold, once recovered."""

    done: set[str] = field(default_factory=set)
    """Tasks finished (their results stand, traced or not)."""
    spent: Usage = field(default_factory=Usage)
    said: list[str] = field(default_factory=list)
    """One line per file that had something set aside, for the run's output."""
    kept: Prefix | None = None
    """The verified prefix the resume trusted, when the recovery left it in place (`redraft.rundir._prefix`)."""
    rewrote: bool = False
    """``results.jsonl`` was replaced by its records (something was set aside or found lost)."""

    def count(self, outcome: Outcome, task_id: str, usage: Usage) -> None:
        """Count a record, in the file's order."""
        if is_infrastructure_failure(outcome):
            self.done.discard(task_id)  # the machinery failed, not the task: redo it
        else:
            self.done.add(task_id)
            self.spent = self.spent + usage


@dataclass
class _Checked:
    """The first pass over the records: where each one's frames begin, and what was set aside."""

    aside: Recovery
    starts: dict[int, int | None] = field(default_factory=dict)
    """By line, past the verified prefix: the verified start of the record's frames, or None when they are lost.
    A line of the prefix is not here: its frames begin at its range's start, or are marked lost."""
    traced_end: int = 0
    """Just past the frames of the last record whose frames are whole."""
    newly_lost: dict[str, int] = field(default_factory=dict)
    """Records whose frames were found lost now, by why."""
    lost: int = 0
    """Records whose frames are lost: found now, or marked so by an earlier recovery."""
    spoilt: list[tuple[int, int]] = field(default_factory=list)
    """The ranges, within the trace, of the records whose frames were found lost now."""
    counted: Recovered = field(default_factory=Recovered)
    """What the records hold, as read (true of the directory unless its results are rewritten)."""
    prefix: Prefix | None = None
    """The verified prefix whose records were counted, not verified again."""

    @property
    def damaged(self) -> bool:
        return bool(self.aside.count or self.newly_lost)


def recover(root: Path, redo_untraced: bool = False) -> Recovered:
    """Recover the run directory at ``root`` by the module's rule; what its records hold."""
    prefix = trusted(root, manifest_run(root) or "")
    checked = _check(root, prefix)
    redo = redo_untraced and checked.lost > 0
    recovered = checked.counted
    if checked.damaged or redo:
        _rewrite(root, checked, redo)
        recovered = Recovered(rewrote=True)
        for entry in (e for e in scan_results(root) if isinstance(e, TaskEntry)):
            recovered.count(entry.result, entry.task_id, entry.result.usage)
    else:
        recovered.kept = checked.prefix
    moved, orphans = _cut_trace(root, checked)
    if (said := checked.aside.line()) is not None:
        recovered.said.append(said)
    if checked.newly_lost or redo or moved:
        recovered.said.append(_trace_line(checked, redo, moved, orphans))
    return recovered


def _check(root: Path, prefix: Prefix | None) -> _Checked:
    checked = _Checked(aside=Recovery(root / RESULTS))
    found = None if prefix is None else digested(root, prefix)
    if prefix is not None and found is not None:  # the prefix's records counted, their frames not verified again
        checked.prefix, checked.lost, checked.traced_end = prefix, found.lost, found.traced_end
        checked.aside.kept = found.kept
        checked.counted.done, checked.counted.spent = found.done, prefix.spent
    path = root / TRACE
    blocks = BlockReader(root)
    with open(path, "rb") if path.exists() else _NoTrace() as trace:
        for item in scan_results(root, None if found is None else found.after):
            if isinstance(item, SetAside):
                checked.aside.note(item)
                continue
            checked.aside.kept += 1
            checked.counted.count(item.result, item.task_id, item.result.usage)
            overlaps = item.start < checked.traced_end  # a range before the last one's end is not this task's
            begin = None if item.lost or overlaps else _verified(trace, blocks, item)
            checked.starts[item.line] = begin
            if begin is not None:
                checked.traced_end = item.end
                continue
            checked.lost += 1
            if not item.marked_lost:
                why = _why(item, path)
                checked.newly_lost[why] = checked.newly_lost.get(why, 0) + 1
                if not item.lost and item.start < item.end:
                    checked.spoilt.append((item.start, item.end))
    return checked


def _why(entry: TaskEntry, trace: Path) -> str:
    if not trace.exists():
        return "the trace is missing"
    return "the trace ends before them" if entry.lost else "the bytes there are not theirs"


def _verified(trace: IO[bytes] | _NoTrace, blocks: BlockReader, entry: TaskEntry) -> int | None:
    """Where the record's frames begin, if its range holds them (a block: the range's start, if it decodes to
    them)."""
    trace.seek(entry.start)
    data = trace.read(entry.end - entry.start)
    frames = blocks.decode(data)
    if frames is not data:
        return None if frames is None or task_span(frames, entry.task_id) is None else entry.start
    begin = task_span(data, entry.task_id, trim=entry.guessed_start)
    return None if begin is None else entry.start + begin


def _rewrite(root: Path, checked: _Checked, redo: bool) -> None:
    """Replace ``results.jsonl`` by its records, each range written out, every other line moved aside."""
    path = root / RESULTS
    with open(damaged_path(path), "ab") as damaged:
        replace(path, _kept(root, checked, redo, damaged))
        damaged.flush()
        os.fsync(damaged.fileno())


def _kept(root: Path, checked: _Checked, redo: bool, damaged: IO[bytes]) -> Iterator[bytes]:
    previous = 0
    for item in scan(root / RESULTS, line_decoder(root)):
        begin = None if isinstance(item, SetAside) else _begin(checked, item, previous)
        if isinstance(item, SetAside) or (begin is None and redo):
            damaged.write(item.data)
            if isinstance(item, Line):
                checked.aside.kept -= 1
            continue
        yield _line(item, begin, previous)
        previous = previous if begin is None else int(item.record[0].get(TRACE_END, begin))


def _begin(checked: _Checked, item: Line[Record], previous: int) -> int | None:
    """Where a record's frames begin (None: lost): as checked, or, in the verified prefix, its range's start."""
    if item.number in checked.starts:
        return checked.starts[item.number]
    fields = item.record[0]
    return None if fields.get(TRACE_LOST) is True else int(fields.get(TRACE_START, previous))


def _line(item: Line[Record], begin: int | None, previous: int) -> bytes:
    """A record's line as written, with its range written out (an empty one, marked, when its frames are lost)."""
    fields = dict(item.record[0])
    if begin is None:
        fields |= {TRACE_START: previous, TRACE_END: previous, TRACE_LOST: True}
    else:
        fields[TRACE_START] = begin
    return msgspec.json.encode(fields) + b"\n"


def _cut_trace(root: Path, checked: _Checked) -> tuple[int, int]:
    """Cut the trace past the last whole frames of a record: the cut moved aside when the directory was damaged
    or it holds more than one whole task, else dropped; a lost range before the cut copied aside. The bytes moved
    or copied, and the whole tasks the cut held."""
    path = root / TRACE
    if not path.exists():
        return 0, 0
    with open(path, "r+b") as trace:
        trace.seek(checked.traced_end)
        orphans = _results_in(iter(Decoded(trace, BlockReader(root))))
        spans = [(a, b) for a, b in checked.spoilt if b <= checked.traced_end]
        if checked.damaged or orphans > 1:
            spans.append((checked.traced_end, path.stat().st_size))
        moved = _copy_aside(trace, spans, damaged_path(path))
        trace.truncate(checked.traced_end)
    return moved, orphans


def _copy_aside(trace: IO[bytes], spans: list[tuple[int, int]], aside: Path) -> int:
    """Append the trace's bytes in ``spans`` to ``aside``; how many."""
    spans = [(a, b) for a, b in spans if b > a]
    if not spans:
        return 0
    moved = 0
    with open(aside, "ab") as out:
        for start, end in spans:
            trace.seek(start)
            while moved_now := out.write(trace.read(min(_CHUNK, end - trace.tell()))):
                moved += moved_now
        out.flush()
        os.fsync(out.fileno())
    return moved


def _results_in(chunks: Iterator[bytes]) -> int:
    """How many `Result` frames follow in the decoded trace (the frames of how many whole tasks), up to bytes
    that are not frames. Text is left undecoded, so a frame whose text was damaged out of UTF-8 is still counted:
    what follows is still whole tasks' frames."""
    found = 0
    unpacker = msgpack.Unpacker(raw=True, strict_map_key=False)
    try:
        for chunk in chunks:
            unpacker.feed(chunk)
            for frame in unpacker:
                found += isinstance(frame, dict) and frame.get(b"kind") == b"result"
    except (msgpack.UnpackException, ValueError):
        pass
    return found


def _trace_line(checked: _Checked, redo: bool, moved: int, orphans: int) -> str:
    parts = []
    if checked.lost and (checked.newly_lost or redo):
        whys = ", ".join(f"{why}: {n}" for why, n in checked.newly_lost.items()) or "marked lost before"
        stand = (
            "their lines moved to results.jsonl.damaged, and the tasks redone (--redo-untraced)"
            if redo
            else "their results stand (--redo-untraced redoes them)"
        )
        parts.append(f"the frames of {checked.lost} task(s) are lost ({whys}); {stand}")
    elif orphans > 1:
        parts.append(f"the frames of {orphans} tasks past the last record (their results are not in {RESULTS})")
    else:
        parts.append("the frames past the last record kept")
    if moved:
        parts.append(f"{moved} bytes set aside in {TRACE}.damaged")
    return f"{TRACE}: " + "; ".join(parts)


class _NoTrace:
    """The trace of a directory that has none: every range reads as nothing."""

    def __enter__(self) -> _NoTrace:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def seek(self, offset: int) -> int:
        return offset

    def read(self, size: int = -1) -> bytes:
        return b""
