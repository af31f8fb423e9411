"""The writer of a run directory: the driver alone appends to it, and a rerun with the same ``--out`` resumes it.

Invariants (`RunStore`): a task's frames are flushed before its result line, which records their byte range and the
directory's id; on open the directory is recovered record by record, and nothing is counted twice; a manifest of
another fingerprint is refused; one writer holds the directory's lock from open to finish; the store keeps no
per-task state for tasks written now, so a run's memory does not grow with its length; a directory that stops
taking writes ends the run with one `RunDirWriteError` line, and the same command resumes it.

See docs/architecture.md, section "The run directory's writer".
"""

from __future__ import annotations

import calendar
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import msgspec

from redraft.errors import RunDirWriteError, UserError
from redraft.jsonlines import records
from redraft.protocols.messages import Result, Usage
from redraft.rundir import _index as index
from redraft.rundir._blocks import BlockWriter, is_compressed
from redraft.rundir._prefix import Running
from redraft.rundir._recovery import recover
from redraft.rundir._results import RUN, latest_results, result_line
from redraft.rundir._wire import check_wire
from redraft.rundir.frames import task_span
from redraft.rundir.kinds import RUN as RUN_DIR
from redraft.rundir.kinds import check_kind
from redraft.rundir.layout import LIVE, MANIFEST, RESULTS, RUN_UID, SUMMARY, TRACE, read_object, write_json
from redraft.rundir.lock import WriterLock, hold
from redraft.rundir.summary import Summary, summarize

Listener = Callable[[list[bytes], Result], None]
"""Told a task's frames and result, once written."""


class RunStore:
    """A run directory opened for appending; see the module docstring for the invariants."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: set[str] = set()
        """Tasks finished by earlier invocations (read on open). Tasks finished now are not added:
        the stream has no repeats, and the driver's memory must not grow with the tasks it runs."""
        self.spent = Usage()
        """Usage of every task recorded in this directory, earlier invocations included."""
        self._trace: IO[bytes] | None = None
        self._blocks: BlockWriter | None = None
        """Compresses each task's frames; None while the trace is written raw (an older version's)."""
        self._results: IO[bytes] | None = None
        self._wall_before = 0.0
        self.run_uid = ""
        """The directory's own id (its manifest's ``run_uid``)."""
        self.started = time.time()
        """When the run began (its manifest's ``started_at``), in wall-clock seconds."""
        self.said: list[str] = []
        """What opening the directory set aside, one line per file (none for an undamaged directory)."""
        self._listeners: list[Listener] = []
        self._lock: WriterLock | None = None
        self._written = 0
        self._results_end = 0
        """Where the next line of ``results.jsonl`` begins."""
        self._index: IO[bytes] | None = None
        """``tasks.index``: where each task's line is (`redraft.rundir._index`)."""
        self._running: Running | None = None
        """The verified prefix as the writer appends, and its checkpoint."""
        self._unwritable: OSError | None = None
        """The write that failed, once one has: nothing more is written (see the module docstring)."""

    @classmethod
    def open(cls, root: Path, manifest: dict[str, Any], *, redo_untraced: bool = False) -> RunStore:
        """Create ``root`` or resume it; `UserError` if it holds a different configuration. ``redo_untraced``:
        the tasks whose frames are lost are redone (by default their results stand)."""
        store = cls(root)
        check_kind(root, RUN_DIR)  # before the lock file is made in someone else's directory
        try:
            store._lock = hold(root)
            store._opening(manifest, redo_untraced)
        except OSError as exc:
            store.close()
            raise store._stopped(exc) from None
        except BaseException:
            store.close()
            raise
        return store

    def _opening(self, manifest: dict[str, Any], redo_untraced: bool) -> None:
        store, root = self, self.root
        existing = resumable(root, manifest)
        if existing is not None:
            store._wall_before = float(existing.get("wall_s", 0.0))
        kept = dict(existing if existing is not None else manifest)
        if existing is None or not existing.get(RUN_UID):  # a new run, or one begun before runs had an id
            kept[RUN_UID] = _lines_run(root) or kept.get(RUN_UID) or new_run_uid()
            write_json(root / MANIFEST, kept)
        store.run_uid = str(kept[RUN_UID])
        store.started = _seconds(kept.get("started_at")) or store.started
        recovered = recover(root, redo_untraced)
        store.done, store.spent, store.said = recovered.done, recovered.spent, recovered.said
        store._running = Running.resumed(root, store.run_uid, recovered.kept, recovered.spent)
        store._running.save()  # what the recovery verified, a later resume need not
        store._index = index.opened(root, rewritten=recovered.rewrote)
        if self._lock is not None and (stale := self._lock.took_over) is not None:
            store.said.insert(0, f"took over the lock of {stale.said()}, which has ended")
        store._trace = open(root / TRACE, "ab")  # noqa: SIM115 - held open for the run
        with open(root / TRACE, "rb") as trace:
            store._blocks = BlockWriter(root) if is_compressed(trace.read(4)) else None
        store._results = open(root / RESULTS, "ab")  # noqa: SIM115
        store._results_end = store._results.seek(0, 2)

    def append(self, frames: list[bytes], result: Result) -> None:
        """Write one finished task: its frames, then its result line."""
        assert self._trace is not None and self._results is not None
        if self._unwritable is not None:
            raise self._stopped(self._unwritable)
        try:
            start = self._trace.tell()
            data = b"".join(frames)
            block = data if self._blocks is None else self._blocks.compress(frames)
            self._trace.write(block)
            self._trace.flush()
            line = result_line(result, start, self._trace.tell(), self.run_uid)
            self._results.write(line)
            self._results.flush()
            if self._index is not None:
                self._index.write(index.entry(result.task_id, self._results_end))
                self._index.flush()
            self._results_end += len(line)
        except OSError as exc:
            self._unwritable = exc
            raise self._stopped(exc) from None
        if self._running is not None:
            self._running.wrote(block, line, result, kept=task_span(data, result.task_id) == 0)
        self._written += 1
        self.spent = self.spent + result.usage
        for listener in self._listeners:
            listener(frames, result)

    def listen(self, listener: Listener) -> None:
        """Tell ``listener`` each task written from now on, its frames and its result."""
        self._listeners.append(listener)

    def sends_batches(self) -> bool:
        """Record in the manifest that this run sends provider batches; whether an earlier invocation did."""
        path = self.root / MANIFEST
        manifest = read_object(path)
        if manifest.get(BATCHED):
            return True
        write_json(path, manifest | {BATCHED: True})
        return False

    @property
    def payer(self) -> str:
        """Whose money this directory's calls are: its own id, kept from its first invocation (the response
        cache records it with each answer the run pays for, `redraft.backends.cache`)."""
        return self.run_uid

    @property
    def wall_before(self) -> float:
        """Wall time of the earlier invocations that wrote this directory (0 for a new run)."""
        return self._wall_before

    def finish(self, wall_s: float, stopped_by: str | None = None) -> Summary:
        """Close the files, write ``summary.json`` from every result line, and return it; release the directory.

        After a write failed, nothing more is written (the summary is returned, not written): the failure is
        the one line the run ends with."""
        failed_before = self._unwritable is not None
        self.close()
        total_wall = self._wall_before + wall_s
        summary = summarize((e.result for e in latest_results(self.root)), wall_s=total_wall)
        summary.stopped_by = stopped_by
        if failed_before:
            return summary
        try:
            manifest_path = self.root / MANIFEST
            write_json(manifest_path, read_object(manifest_path) | {"wall_s": total_wall})
            write_json(self.root / SUMMARY, msgspec.to_builtins(summary))
        except OSError as exc:
            raise self._stopped(exc) from None
        return summary

    def close(self) -> None:
        """Close the files and release the directory, writing nothing more (a run that ends before its summary)
        but the verified prefix (`redraft.rundir._prefix`)."""
        for handle in (self._trace, self._results, self._index):
            if handle is not None:
                try:
                    handle.close()
                except OSError as exc:  # what was buffered met the same full disk: the resume cuts the torn tail
                    self._unwritable = self._unwritable or exc
        self._trace = self._results = self._index = None
        if self._running is not None and self._unwritable is None:
            self._running.save()
        self._running = None
        if self._lock is not None:
            (self.root / LIVE).unlink(missing_ok=True)  # what was in flight is no more: the run has ended
            self._lock.release()
            self._lock = None

    def _stopped(self, exc: OSError) -> RunDirWriteError:
        """The one line a run ends with when its directory stops taking writes."""
        recorded = len(self.done) + self._written
        return RunDirWriteError(
            f"cannot write in the run directory {self.root} ({exc.strerror or exc}): {recorded} task(s) are "
            "recorded there; free space or make it writable, then rerun the same command to resume"
        )


BATCHED = "batched"
"""The manifest's key for "this run has sent provider batches"."""


def new_run_uid() -> str:
    return uuid.uuid4().hex[:16]


def _lines_run(root: Path) -> str | None:
    """The run id the first result line carries (None for a line of a writer older than run ids): a directory
    whose manifest was lost (deleted) keeps its records, rather than setting every one aside as another run's."""
    for line in records(root / RESULTS, msgspec.json.decode):
        return str(line[RUN]) if isinstance(line, dict) and isinstance(line.get(RUN), str) else None
    return None


def _seconds(stamp: object) -> float | None:
    """A manifest's ``started_at`` (``2026-11-26T10:00:00Z``) in wall-clock seconds, or None."""
    try:
        return float(calendar.timegm(time.strptime(str(stamp), "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def resumable(root: Path, manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The manifest ``root`` holds, if any (None: a new run); `UserError` if it is another configuration's or
    another wire version's.

    Writes nothing: a dry run asks it too. A directory a pre-release redraft wrote is refused first, in one
    line (`redraft.rundir._wire`), whatever its configuration; so is a directory that is not a run's
    (`redraft.rundir.kinds`)."""
    check_kind(root, RUN_DIR)
    check_wire(root)
    manifest_path = root / MANIFEST
    if not manifest_path.exists():
        return None
    existing = _existing_manifest(manifest_path)
    if existing.get("fingerprint") != manifest["fingerprint"]:
        raise UserError(_refusal(root, existing, manifest))
    return existing


def _existing_manifest(path: Path) -> dict[str, Any]:
    try:
        existing = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON ({exc}); use another --out") from None
    if not isinstance(existing, dict):
        raise UserError(f"{path} is not a run's manifest (not a JSON object); use another --out")
    return existing


def _refusal(root: Path, existing: dict[str, Any], manifest: dict[str, Any]) -> str:
    """Why ``root`` is not resumed: every setting that differs, one line each, its values whole.

    Whole, because the difference may sit anywhere in a value (the port of an endpoint, the end of a path).
    A nested setting (the prompts' versions) is shown entry by entry, ``prompts.critique``.
    """
    head = (
        f"{root} holds a run with another configuration; rerun with the same settings to resume it, "
        "or use another --out"
    )
    old, new = _flat(existing.get("identity")), _flat(manifest.get("identity"))
    keys = sorted(k for k in old.keys() | new.keys() if old.get(k, _ABSENT) != new.get(k, _ABSENT))
    if not keys:  # another version hashed the same settings otherwise
        fingerprints = f"{existing.get('fingerprint')} vs {manifest['fingerprint']}"
        return f"{head}: the settings read the same, but their fingerprints differ ({fingerprints})"
    lines = [f"  {key}: {_shown(old.get(key, _ABSENT))} -> {_shown(new.get(key, _ABSENT))}" for key in keys]
    return "\n".join([f"{head}. What differs (the run's -> this one's):", *lines])


_ABSENT = object()
"""A setting one identity has and the other has not (told apart from a setting that is null)."""


def _flat(value: object, name: str = "") -> dict[str, object]:
    """Settings by dotted name: a non-empty mapping is opened (``prompts.critique``), anything else is one value."""
    if not isinstance(value, dict) or (name and not value):
        return {name: value} if name else {}  # an identity that is no mapping (a hand-edited manifest): nothing
    flat: dict[str, object] = {}
    for key, inner in value.items():
        flat |= _flat(inner, f"{name}.{key}" if name else str(key))
    return flat


def _shown(value: object) -> str:
    return "(absent)" if value is _ABSENT else json.dumps(value, sort_keys=True)
