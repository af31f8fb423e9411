"""Read a run directory without loading it: result records streamed, one task's frames at a time.

The invariant this module relies on (kept by `redraft.store`): ``results.jsonl``
lists finished tasks in the order their frames sit in ``trace.msgpack``, and each
record's ``trace_end`` is the trace offset just past its frames. So a task's
frames are the byte range ``[previous record's trace_end, its trace_end)``: one
task can be found by seeking, and a whole run streamed with one task in memory.

Frames are read as plain dicts (``msgpack``, kind in ``kind``), not decoded into
the typed union: a reader must keep working on run directories written by older
and newer versions, whose frames carry kinds and fields this version does not know.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import msgpack

from redraft.errors import UserError
from redraft.store import MANIFEST, RESULTS, SUMMARY, TRACE, superseded

Frame = dict[str, Any]
Record = dict[str, Any]


@dataclass(frozen=True)
class TaskEntry:
    """One finished task: its result record and where its frames are in the trace."""

    record: Record
    start: int
    end: int

    @property
    def task_id(self) -> str:
        return str(self.record.get("task_id", ""))


class RunReader:
    """A run directory opened for reading. `UserError` if ``root`` is not one."""

    def __init__(self, root: Path) -> None:
        self.root = root
        if not root.is_dir():
            why = "not a directory" if root.exists() else "no such directory"
            raise UserError(f"{root} is not a run directory ({why})")
        if not (root / RESULTS).is_file():
            raise UserError(f"{root} is not a run directory (no {RESULTS})")

    def manifest(self) -> dict[str, Any]:
        return _read_json(self.root / MANIFEST)

    def summary(self) -> dict[str, Any]:
        """``summary.json``, or an empty dict while a run has not finished one."""
        return _read_json(self.root / SUMMARY)

    def entries(self) -> Iterator[TaskEntry]:
        """Every task's latest complete record, in trace order, with its frame range (a record the
        machinery's failure wrote and a resume redid is skipped: the later one wins)."""
        skip = superseded(entry.record for entry in self._all_entries())
        for index, entry in enumerate(self._all_entries()):
            if index not in skip:
                yield entry

    def _all_entries(self) -> Iterator[TaskEntry]:
        start = 0
        with open(self.root / RESULTS, "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    break  # a torn last line: a writer is still at it, or was killed
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    break
                end = int(record.get("trace_end", start))
                yield TaskEntry(record=record, start=start, end=end)
                start = end

    def find(self, task_id: str) -> TaskEntry:
        """The entry of ``task_id``; `UserError` naming a few known ids if there is none."""
        known: list[str] = []
        for entry in self.entries():
            if entry.task_id == task_id:
                return entry
            if len(known) < 5:
                known.append(entry.task_id)
        hint = f" (e.g. {', '.join(known)})" if known else " (the run has no finished task)"
        raise UserError(f"no task {task_id!r} in {self.root}{hint}")

    def frames(self, entry: TaskEntry, trace: IO[bytes] | None = None) -> list[Frame]:
        """The frames of one task, read by seeking to its byte range."""
        if entry.end <= entry.start:
            return []
        if trace is None:
            with open(self.root / TRACE, "rb") as f:
                return self.frames(entry, f)
        trace.seek(entry.start)
        return unpack_frames(trace.read(entry.end - entry.start))

    def tasks(self) -> Iterator[tuple[TaskEntry, list[Frame]]]:
        """Every task with its frames, streamed: one task's frames in memory at a time."""
        trace_path = self.root / TRACE
        if not trace_path.exists():
            for entry in self.entries():
                yield entry, []
            return
        with open(trace_path, "rb") as trace:
            for entry in self.entries():
                yield entry, self.frames(entry, trace)


def unpack_frames(data: bytes) -> list[Frame]:
    """Consecutive MessagePack frames as dicts; a torn tail (a truncated file) is dropped."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(data)
    frames: list[Frame] = []
    try:
        for obj in unpacker:
            frames.append(obj if isinstance(obj, dict) else {"kind": "?", "value": obj})
    except (msgpack.UnpackException, ValueError):
        pass  # bytes that are not MessagePack: show what decoded before them
    return frames


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(task_id: str) -> str:
    """A file name for a task id: ids hold ``/`` (``HumanEval/0``) and anything else.

    The hash suffix keeps two ids that clean up alike (``a/b`` and ``a_b``) apart.
    """
    digest = hashlib.blake2b(task_id.encode(), digest_size=4).hexdigest()
    return f"{_UNSAFE.sub('_', task_id).strip('._')[:80]}-{digest}"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}
