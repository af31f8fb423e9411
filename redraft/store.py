"""The run directory: the only place a run's output lives, written by the driver alone.

```
manifest.json   config, its fingerprint, package versions, start time
trace.msgpack   every protocol frame of every finished task, back to back
results.jsonl   one JSON object per finished task
summary.json    the end table's figures
```

Invariants that make a rerun with the same ``--out`` a resume:

- A task's frames are appended to the trace and flushed *before* its result line;
  each result line records the trace offset just past its frames (``trace_end``).
- On open, a torn last result line (a writer killed mid-line) is cut off, and the
  trace is cut back to the last complete result's ``trace_end``, so frames of a
  task whose result never landed are dropped and nothing is counted twice.
- A manifest whose fingerprint differs from the new config's is refused: one run
  directory never mixes two configurations.
- A record whose ``error_type`` is the machinery's failure (`INFRASTRUCTURE_CAUSES`,
  written by versions that did not redo such tasks) is not a finished task: a
  resume redoes it and appends a new record, and every reader takes a task's
  later record (`superseded`).

Writes are flushed, not fsynced: a killed process loses nothing, a crashed
machine may lose the last few tasks, which the resume then redoes (a result
line whose frames did not reach the trace is cut off with everything after it).

The store keeps no per-task state for tasks written now (only the ids finished
by earlier invocations, to skip them), and `summarize` streams the results: a
run's memory does not grow with its length.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import msgspec

from redraft.errors import INFRASTRUCTURE_CAUSES, UserError
from redraft.protocols.messages import Result, Usage

MANIFEST, TRACE, RESULTS, SUMMARY = "manifest.json", "trace.msgpack", "results.jsonl", "summary.json"


def fingerprint(config: dict[str, Any]) -> str:
    """A stable hash of everything that changes what a task's result would be."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class Summary(msgspec.Struct, kw_only=True):
    """The end table's figures (``summary.json``)."""

    tasks: int = 0
    passed: int = 0
    pass_rate: float = 0.0
    initial_passed: int = 0
    initial_pass_rate: float = 0.0
    mean_score: float = 0.0
    initial_mean_score: float = 0.0
    mean_rounds: float = 0.0
    stop_reasons: dict[str, int] = {}
    errors: dict[str, int] = {}
    """Tasks that stopped with ``error``, counted by cause (the exception type)."""
    usage: Usage = Usage()
    task_wall_s: float = 0.0
    """Sum of the tasks' own wall times (they overlap)."""
    wall_s: float = 0.0
    """Wall time of the driver invocation(s) that wrote the results."""
    usage_by_role: dict[str, Usage] = {}
    unpriced_models: list[str] = []
    """Models without a price: their calls are in the token totals but cost 0 USD here."""
    stopped_by: str | None = None
    """Why dispatch stopped before every task ran (a run budget), or None."""
    retried_tasks: int = 0
    """Tasks the driver sent out more than once because the machinery failed under them."""
    retries: dict[str, int] = {}
    """Those failed attempts, counted by cause (``ActorDiedError``, ``CallTimeoutError``...)."""


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
        self._results: IO[bytes] | None = None
        self._wall_before = 0.0

    @classmethod
    def open(cls, root: Path, manifest: dict[str, Any]) -> RunStore:
        """Create ``root`` or resume it; `UserError` if it holds a different configuration."""
        store = cls(root)
        root.mkdir(parents=True, exist_ok=True)
        manifest_path = root / MANIFEST
        if manifest_path.exists():
            try:
                existing = json.loads(manifest_path.read_text())
            except json.JSONDecodeError as exc:
                raise UserError(f"{manifest_path} is not valid JSON ({exc}); use another --out") from None
            if existing.get("fingerprint") != manifest["fingerprint"]:
                changed = _changes(existing.get("identity", {}), manifest.get("identity", {}))
                raise UserError(
                    f"{root} holds a run with another configuration ({changed}; fingerprint "
                    f"{existing.get('fingerprint')} vs {manifest['fingerprint']}); rerun with the same "
                    "settings to resume it, or use another --out"
                )
            store._wall_before = float(existing.get("wall_s", 0.0))
        else:
            _write_json(manifest_path, manifest)
        store._recover()
        store._trace = open(root / TRACE, "ab")  # noqa: SIM115 - held open for the run
        store._results = open(root / RESULTS, "ab")  # noqa: SIM115
        return store

    def _recover(self) -> None:
        results_path, trace_path = self.root / RESULTS, self.root / TRACE
        trace_end = 0
        trace_size = trace_path.stat().st_size if trace_path.exists() else 0
        if results_path.exists():
            good = 0
            with open(results_path, "rb") as f:
                for line in f:
                    if not line.endswith(b"\n"):
                        break  # torn last line: its task is redone
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError:
                        break
                    if int(record.get("trace_end", 0)) > trace_size:
                        break  # its frames never reached the disk (a machine crash): redo it and what follows
                    if is_infrastructure_record(record):
                        self.done.discard(record["task_id"])  # the machinery failed, not the task: redo it
                    else:
                        self.done.add(record["task_id"])
                        self.spent = self.spent + msgspec.convert(record["usage"], Usage)
                    trace_end = int(record.get("trace_end", trace_end))
                    good += len(line)
            if good < results_path.stat().st_size:
                os.truncate(results_path, good)
        if trace_path.exists() and trace_path.stat().st_size > trace_end:
            os.truncate(trace_path, trace_end)

    def append(self, frames: list[bytes], result: Result) -> None:
        """Write one finished task: its frames, then its result line."""
        assert self._trace is not None and self._results is not None
        for frame in frames:
            self._trace.write(frame)
        self._trace.flush()
        record = result_record(result)
        record["trace_end"] = self._trace.tell()
        self._results.write(msgspec.json.encode(record) + b"\n")
        self._results.flush()
        self.spent = self.spent + result.usage

    @property
    def wall_before(self) -> float:
        """Wall time of the earlier invocations that wrote this directory (0 for a new run)."""
        return self._wall_before

    def records(self) -> Iterator[dict[str, Any]]:
        """Every task's latest record (a redone task's earlier record is skipped)."""
        skip = superseded(self._raw_records())
        for index, record in enumerate(self._raw_records()):
            if index not in skip:
                yield record

    def _raw_records(self) -> Iterator[dict[str, Any]]:
        with open(self.root / RESULTS, "rb") as f:
            for line in f:
                yield json.loads(line)

    def finish(self, wall_s: float, stopped_by: str | None = None) -> Summary:
        """Close the files, write ``summary.json`` from every result line, and return it."""
        for handle in (self._trace, self._results):
            if handle is not None:
                handle.close()
        total_wall = self._wall_before + wall_s
        manifest_path = self.root / MANIFEST
        manifest = json.loads(manifest_path.read_text())
        manifest["wall_s"] = total_wall
        _write_json(manifest_path, manifest)
        summary = summarize(self.records(), wall_s=total_wall)
        summary.stopped_by = stopped_by
        _write_json(self.root / SUMMARY, msgspec.to_builtins(summary))
        return summary


def result_record(result: Result) -> dict[str, Any]:
    """The ``results.jsonl`` object of one task."""
    record: dict[str, Any] = msgspec.to_builtins(result)
    del record["kind"], record["v"]
    return record


def is_infrastructure_record(record: dict[str, Any]) -> bool:
    """Whether a result record holds the machinery's failure rather than the task's result (redone on resume)."""
    return bool(record.get("error")) and record.get("error_type") in INFRASTRUCTURE_CAUSES


def superseded(records: Iterator[dict[str, Any]]) -> set[int]:
    """Indices of records that a later record of the same task replaces (the earlier one failed for
    the machinery and was redone). Only such records are remembered while streaming, so memory stays flat."""
    pending: dict[str, int] = {}
    replaced: set[int] = set()
    for index, record in enumerate(records):
        task_id = record.get("task_id", "")
        if task_id in pending:
            replaced.add(pending.pop(task_id))
        if is_infrastructure_record(record):
            pending[task_id] = index
    return replaced


def summarize(records: Iterator[dict[str, Any]], *, wall_s: float) -> Summary:
    """Totals over result records, streamed (memory does not grow with the run)."""
    s = Summary(wall_s=wall_s)
    score = initial_score = rounds = 0.0
    reasons: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    usage = Usage()
    by_role: dict[str, Usage] = {}
    unpriced: set[str] = set()
    retries: Counter[str] = Counter()
    for r in records:
        s.tasks += 1
        s.retried_tasks += r.get("attempts", 1) > 1
        retries.update(r.get("retried_for", []))
        s.passed += bool(r["passed"])
        s.initial_passed += bool(r["initial_passed"])
        score += r["score"]
        initial_score += r["initial_score"]
        rounds += r["rounds"]
        reasons[r["stop_reason"]] += 1
        if r.get("error"):
            errors[r.get("error_type") or _legacy_error_type(r["error"])] += 1
        usage = usage + msgspec.convert(r["usage"], Usage)
        for role, role_usage in r.get("usage_by_role", {}).items():
            by_role[role] = by_role.get(role, Usage()) + msgspec.convert(role_usage, Usage)
        unpriced.update(r.get("unpriced_models", []))
        s.task_wall_s += r["wall_s"]
    if s.tasks:
        s.pass_rate = s.passed / s.tasks
        s.initial_pass_rate = s.initial_passed / s.tasks
        s.mean_score, s.initial_mean_score = score / s.tasks, initial_score / s.tasks
        s.mean_rounds = rounds / s.tasks
    s.stop_reasons, s.errors, s.usage = dict(reasons), dict(errors), usage
    s.usage_by_role, s.unpriced_models = by_role, sorted(unpriced)
    s.retries = dict(retries)
    return s


def _legacy_error_type(error: str) -> str:
    """The cause of a record written before ``error_type`` existed, when its ``error`` was ``Type: message``."""
    return error.split(":", 1)[0]


def _changes(old: dict[str, Any], new: dict[str, Any], most: int = 4) -> str:
    """The settings that differ between two identities, e.g. ``samples 1 -> 2``."""
    keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    shown = [f"{k} {_short(old.get(k))} -> {_short(new.get(k))}" for k in keys[:most]]
    more = f" and {len(keys) - most} more" if len(keys) > most else ""
    return ", ".join(shown) + more if shown else "settings differ"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 40 else text[:37] + "..."


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
