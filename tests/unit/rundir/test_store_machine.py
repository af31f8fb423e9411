"""Pay-once for the run directory, as a state machine: random sequences of appends, kills mid-append, crashes that
lose a file's tail, damage in the middle of either file, readers that look while the writer is mid-append, and
resumes, against a model of what must stand.

The invariants, checked at every resume and every read:

- every finished task (its result line whole) is recorded exactly once, and readers read it once, with its frames
  unless they were damaged;
- no valid record is dropped: a task is redone only when its line never landed (in flight at a kill, lost by a
  crash) or was damaged; so no task is paid for twice beyond those;
- every byte set aside is named: ``*.damaged`` grow by exactly the damaged lines and the damaged or orphaned
  frames, and the resume's lines say as much (which lines, at which byte; how many trace bytes).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from redraft.protocols.messages import Draft, Result, Task, Usage, encode
from redraft.rundir import RunReader, RunStore
from redraft.rundir.layout import RESULTS, TRACE
from tests.support.machines import MACHINE, bytes_said
from tests.unit.rundir.test_damaged_rundir import manifest

GARBAGE = b"\xc1"
"""A byte MessagePack never uses: frames overwritten with it are damage no reader can take for frames."""
ZSTD = b"\x28\xb5\x2f\xfd"
"""The first bytes of a compressed range: text damage is made in raw frames only."""


def result(n: int) -> Result:
    return Result(
        task_id=f"t{n}",
        scenario="arithmetic",
        answer=str(n),
        text=f"Answer: {n}",
        score=1.0,
        passed=n % 2 == 0,
        initial_score=0.0,
        initial_passed=False,
        rounds=1 + n % 3,
        stop_reason="threshold",
        usage=Usage(input_tokens=10 + n, output_tokens=n % 7, calls=1 + n % 4),
        wall_s=0.1,
    )


def frames(n: int, size: int) -> list[bytes]:
    task = Task(task_id=f"t{n}", scenario="arithmetic", prompt="p" * size, reference={})
    return [encode(task), encode(Draft(task_id=f"t{n}", round=0, sample=0, text=f"Answer: {n}")), encode(result(n))]


@dataclass
class Group:
    """One task's frames as written to the trace (whole, or cut by a kill), and whether damage hit them."""

    task: str
    start: int
    end: int
    size: int
    """Its bytes when whole."""
    hit: bool = False


@dataclass
class Line:
    """A line of ``results.jsonl`` as the model knows it: whose, and whether it is still a record."""

    task: str
    valid: bool


class HalfWritten:
    """The writer's handle on ``results.jsonl``, stopped mid-line for a reader to look (the frames already flushed)."""

    def __init__(self, inner: IO[bytes], cut: int, look: Any) -> None:
        self.inner, self.cut, self.look = inner, cut, look

    def write(self, data: bytes) -> int:
        self.cut = min(self.cut, len(data) - 1)  # the newline last: a line without it is no record yet
        self.inner.write(data[: self.cut])
        self.inner.flush()
        self.look()
        return self.inner.write(data[self.cut :])

    def flush(self) -> None:
        self.inner.flush()


class RunStoreMachine(RuleBasedStateMachine):
    raw = True
    """The trace written raw, as redraft 0.1 did: text damage can reach single fields (`CompressedRunStoreMachine`
    writes it as redraft writes it now, a zstd frame per task)."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="redraft-store-machine-"))
        self.root = self.tmp / "run"
        self.store: RunStore | None = None
        self.next = 0
        self.redo: list[int] = []
        """Tasks begun whose record is not there (killed in flight, lost to a crash or damage): to redo."""
        self.lines: list[Line] = []
        self.lost: set[str] = set()
        self.groups: list[Group] = []
        self.paid: Counter[str] = Counter()
        self.excused: Counter[str] = Counter()
        """Times a task's record was lost to a kill, a crash or damage: the times it may be paid again."""
        self.aside = {RESULTS: b"", TRACE: b""}

    def teardown(self) -> None:
        self._close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------ the writer

    @initialize()
    def begin(self) -> None:
        self.store = RunStore.open(self.root, manifest())
        if self.raw:
            self.store._blocks = None  # the trace written as redraft 0.1 wrote it
        assert self.store.done == set() and self.store.said == []

    def _task(self) -> int:
        if self.redo:
            return self.redo.pop(0)
        self.next += 1
        return self.next - 1

    @precondition(lambda self: self.store is not None)
    @rule(size=st.integers(0, 300))
    def append(self, size: int) -> None:
        self._append(size, None)

    @precondition(lambda self: self.store is not None)
    @rule(size=st.integers(0, 300), cut=st.integers(0, 400))
    def append_while_a_reader_looks(self, size: int, cut: int) -> None:
        """A reader opens the directory with the task's frames flushed and part of its line written."""
        self._append(size, cut)

    def _append(self, size: int, cut: int | None) -> None:
        assert self.store is not None and self.store._results is not None
        n = self._task()
        start = self.trace_size()
        written = frames(n, size)
        if cut is not None:
            inner = self.store._results
            self.store._results = HalfWritten(inner, cut, self.reads_the_records)  # type: ignore[assignment]
        try:
            self.store.append(written, result(n))
        finally:
            if cut is not None:
                self.store._results = inner
        self.paid[f"t{n}"] += 1
        self.lost.discard(f"t{n}")
        size = self.trace_size() - start  # as the writer wrote them (a writer may compress them)
        self.groups.append(Group(f"t{n}", start, start + size, size))
        self.lines.append(Line(f"t{n}", valid=True))

    @precondition(lambda self: self.store is not None)
    @rule(size=st.integers(0, 300), cut=st.floats(0, 1))
    def killed_mid_append(self, size: int, cut: float) -> None:
        """The writer dies while writing a task: its frames and its line land up to a byte, or wholly."""
        trace_at, results_at = self.trace_size(), self.results_size()
        self._append(size, None)
        written = self.groups[-1].end - self.groups[-1].start
        line = self.results_size() - results_at
        landed = round(cut * (written + line))
        self._close()
        with open(self.root / TRACE, "r+b") as f:
            f.truncate(trace_at + min(landed, written))
        with open(self.root / RESULTS, "r+b") as f:
            f.truncate(results_at + max(0, landed - written))
        self.groups[-1].end = trace_at + min(landed, written)
        if landed < written + line:
            self._unrecord(self.lines[-1])
            if landed > written:
                self.lines[-1].valid = False  # torn
            else:
                self.lines.pop()

    @precondition(lambda self: self.store is not None)
    @rule()
    def killed_between_tasks(self) -> None:
        self._close()

    @precondition(lambda self: self.store is not None)
    @rule()
    def finish(self) -> None:
        assert self.store is not None
        summary = self.store.finish(1.0)
        self.store = None
        assert summary.tasks == len(self.recorded())
        assert summary.usage.calls == sum(result(int(t[1:])).usage.calls for t in self.recorded())

    def _close(self) -> None:
        """The process is gone: its files are closed, nothing more written (every write was flushed already)."""
        if self.store is not None:
            for handle in (self.store._trace, self.store._results):
                if handle is not None:
                    handle.close()
            if self.store._lock is not None:  # the directory's lock is not what this machine studies (its own tests)
                self.store._lock.release()
            self.store = None

    def _unrecord(self, line: Line) -> None:
        if line.valid:
            line.valid = False
            self.excused[line.task] += 1
            self.redo.append(int(line.task[1:]))

    # ------------------------------------------------------------ what befalls a closed directory

    @rule(data=st.data())
    def a_crash_loses_the_last_lines(self, data: st.DataObject) -> None:
        """The machine crashed: the last lines written (flushed, not synced) are gone, their frames stay."""
        self._close()
        if not self.lines:
            return
        lost = data.draw(st.integers(1, len(self.lines)))
        kept = self.results_lines()[: len(self.lines) - lost]
        (self.root / RESULTS).write_bytes(b"".join(kept))
        for line in self.lines[len(kept) :]:
            self._unrecord(line)
        del self.lines[len(kept) :]

    @rule(cut=st.floats(0, 1))
    def a_crash_cuts_the_trace(self, cut: float) -> None:
        self._close()
        at = round(cut * self.trace_size())
        with open(self.root / TRACE, "r+b") as f:
            f.truncate(at)
        for group in self.groups:
            group.end = min(group.end, at)
        self.groups = [g for g in self.groups if g.start < at]

    @rule(data=st.data())
    def a_line_is_damaged(self, data: st.DataObject) -> None:
        """NUL bytes, which no JSON holds, over part of one line (its newline kept)."""
        self._close()
        if not self.lines:
            return
        number = data.draw(st.integers(0, len(self.lines) - 1))
        lines = self.results_lines()
        body = len(lines[number].rstrip(b"\n"))
        if body == 0:
            return
        at = data.draw(st.integers(0, body - 1))
        span = data.draw(st.integers(1, body - at))
        lines[number] = lines[number][:at] + b"\0" * span + lines[number][at + span :]
        (self.root / RESULTS).write_bytes(b"".join(lines))
        self._unrecord(self.lines[number])

    @rule(data=st.data())
    def frames_are_damaged(self, data: st.DataObject) -> None:
        """Garbage over the trace from the start of one task's frames, maybe into the next tasks'."""
        self._close()
        if not any(g.end > g.start for g in self.groups):
            return
        group = data.draw(st.sampled_from([g for g in self.groups if g.end > g.start]))
        span = data.draw(st.integers(1, self.trace_size() - group.start))
        with open(self.root / TRACE, "r+b") as f:
            f.seek(group.start)
            f.write(GARBAGE * span)
        for other in self.groups:
            other.hit = other.hit or (other.start < group.start + span and other.end > group.start)

    @rule(data=st.data(), where=st.sampled_from(["task id", "prompt"]))
    def text_in_the_frames_is_damaged(self, data: st.DataObject, where: str) -> None:
        """One byte of a frame's text made not UTF-8: in its task's id (its frames then lost), or in its prompt
        (the frame then reads as a generic one, nothing lost: there is no checksum to tell)."""
        self._close()
        trace = bytearray((self.root / TRACE).read_bytes())
        whole = [g for g in self.groups if g.end - g.start == g.size and not g.hit]
        whole = [g for g in whole if bytes(trace[g.start : g.start + 4]) != ZSTD]  # raw frames only
        if not whole:
            return
        group = data.draw(st.sampled_from(whole))
        if where == "task id":
            trace[trace.index(b"task_id", group.start) + len("task_id") + 1] = 0xFF
            group.hit = True
        elif (at := trace.find(b"pp", group.start, group.end)) >= 0:
            trace[at] = 0xFF
        (self.root / TRACE).write_bytes(bytes(trace))

    # ------------------------------------------------------------ the resume, and what it must say

    @precondition(lambda self: self.store is None)
    @rule(redo=st.booleans())
    def resume(self, redo: bool) -> None:
        """Reopen the directory (``redo``: with ``--redo-untraced``) and check what it kept and set aside."""
        expected = self.expected_recovery(redo)
        self.store = RunStore.open(self.root, manifest(), redo_untraced=redo)
        if self.raw:
            self.store._blocks = None  # the trace written as redraft 0.1 wrote it
        for name, moved in expected.aside.items():
            self.aside[name] += moved
            assert self.damaged(name) == self.aside[name], name
        self.said_names(expected)
        records = [task for task in self.recorded() if task not in expected.redone]
        assert self.store.done == set(records)
        assert self.store.spent == sum((result(int(t[1:])).usage for t in records), Usage())
        assert self.trace_size() == expected.traced_end
        self.lost = (self.lost | expected.newly_lost) - expected.redone
        for line in self.lines:
            if line.task in expected.redone:
                self._unrecord(line)
        self.lines = [line for line in self.lines if line.valid]
        self.groups = [g for g in self.groups if g.end <= expected.traced_end]
        self.reads_the_records()

    def said_names(self, expected: Expected) -> None:
        """The resume's lines name what was set aside: the results' lines by number and byte, the trace's bytes."""
        assert self.store is not None
        said = {line.split(":")[0]: line for line in self.store.said}
        bad = [i for i, line in enumerate(self.lines) if not line.valid]
        if not bad:
            assert RESULTS not in said
        else:
            sizes = [len(line) for line in expected.results_lines]
            kept = len(self.lines) - len(bad) - len(expected.redone)
            head = f"{RESULTS}: kept {kept}, set aside {len(bad)} line"
            assert said[RESULTS].startswith(head)
            for i in bad[:3]:
                assert f"line {i + 1} (byte {sum(sizes[:i])})" in said[RESULTS]
        assert bytes_said(said.get(TRACE, ""), f"{TRACE}.damaged") == len(expected.aside[TRACE])

    def expected_recovery(self, redo: bool) -> Expected:
        """What the resume must keep and set aside, from the model and the files as they are."""
        lines, trace = self.results_lines(), (self.root / TRACE).read_bytes()
        assert len(lines) == len(self.lines)
        expected = Expected(results_lines=lines)
        spoilt: list[tuple[int, int]] = []
        for data, line in zip(lines, self.lines, strict=True):
            if not line.valid or line.task in self.lost:
                continue
            record = json.loads(data)
            start, end = record["trace_start"], record["trace_end"]
            hit = any(g.hit and g.start < end and g.end > start for g in self.groups)
            if end > len(trace) or hit:
                expected.newly_lost.add(line.task)
                if hit and end <= len(trace) and start < end:
                    spoilt.append((start, end))
                continue
            expected.traced_end = end
        if redo:
            expected.redone = (self.lost & set(self.recorded())) | expected.newly_lost
        pairs = zip(lines, self.lines, strict=True)
        moved_lines = b"".join(data for data, line in pairs if not line.valid or line.task in expected.redone)
        cut = expected.traced_end
        damaged = any(not line.valid for line in self.lines) or bool(expected.newly_lost)
        tail = trace[cut:] if damaged or self.orphans(cut, len(trace)) > 1 else b""
        expected.aside = {
            RESULTS: moved_lines,
            TRACE: b"".join(trace[a:b] for a, b in spoilt if b <= cut) + tail,
        }
        return expected

    def orphans(self, cut: int, size: int) -> int:
        """Whole tasks' frames past ``cut`` before any damage (their results lost)."""
        found = 0
        for group in sorted((g for g in self.groups if g.start >= cut), key=lambda g: g.start):
            if group.hit or group.end - group.start < group.size:
                break
            found += 1
        return found

    # ------------------------------------------------------------ readers, and the invariants

    def reads_the_records(self) -> None:
        """Every reader's view: each recorded task once, in order, its frames unless they were damaged."""
        read = list(RunReader(self.root).tasks())
        assert [entry.task_id for entry, _ in read] == self.recorded()
        assert {entry.task_id for entry, _ in read if entry.lost} == self.lost & set(self.recorded())
        for entry, found in read:
            if not entry.lost:
                assert [frame.kind for frame in found] == ["task", "draft", "result"]
                assert found[-1].message.task_id == entry.task_id  # type: ignore[union-attr]

    @invariant()
    def no_task_is_paid_twice_but_for_a_kill_a_crash_or_damage(self) -> None:
        for task, paid in self.paid.items():
            assert paid <= 1 + self.excused[task], task

    def recorded(self) -> list[str]:
        return [line.task for line in self.lines if line.valid]

    def results_lines(self) -> list[bytes]:
        path = self.root / RESULTS
        return path.read_bytes().splitlines(keepends=True) if path.exists() else []

    def results_size(self) -> int:
        return (self.root / RESULTS).stat().st_size

    def trace_size(self) -> int:
        return (self.root / TRACE).stat().st_size

    def damaged(self, name: str) -> bytes:
        path = self.root / f"{name}.damaged"
        return path.read_bytes() if path.exists() else b""


@dataclass
class Expected:
    """What the model expects a resume to do."""

    results_lines: list[bytes]
    traced_end: int = 0
    """Just past the last record whose frames are whole: where the trace is cut."""
    newly_lost: set[str] = field(default_factory=set)
    redone: set[str] = field(default_factory=set)
    """Tasks whose frames are lost, their lines moved aside (``--redo-untraced``)."""
    aside: dict[str, bytes] = field(default_factory=dict)
    """By file: the bytes its ``.damaged`` gains."""


RunStoreMachine.TestCase.settings = MACHINE
test_run_store_keeps_every_finished_task_once_and_names_what_it_sets_aside = RunStoreMachine.TestCase


class CompressedRunStoreMachine(RunStoreMachine):
    raw = False


CompressedRunStoreMachine.TestCase.settings = MACHINE
test_the_compressed_trace_keeps_every_finished_task_once_and_names_what_it_sets_aside = (
    CompressedRunStoreMachine.TestCase
)
