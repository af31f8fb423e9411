"""Pay-once for provider batches, as a state machine: collectors of two endpoints send batches and journal them,
are killed before or while writing a line, end batches; the journal is damaged, emptied or deleted, a line of another
run lands in it; a collector is restarted by Ray mid-run, or the driver resumes the run, against a model of what the
provider holds (an in-memory batch API).

The invariants, checked at every restart and resume:

- every batch still open at the provider is followed, so none of its calls is sent (paid) again, but for a batch
  whose collector was killed before its line was begun (nothing anywhere says it was sent);
- nothing followed is a batch the provider does not hold;
- no valid line is dropped, and every byte set aside is named: ``batches.jsonl.damaged`` grows by exactly the torn,
  damaged and foreign lines, and the driver's line says how many.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import msgspec
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from redraft.actors._batches import batch_run
from redraft.backends._batch_journal import JOURNAL, BatchJournal, BatchRun, JournalLine, left_open, metadata
from redraft.rundir import RunStore
from tests.support.machines import MACHINE
from tests.unit.backends.test_batch import MemoryBatches
from tests.unit.rundir.test_damaged_rundir import manifest

ENDPOINTS = ("openai:gpt-4o-mini", "openai:gpt-4o")
endpoints = st.sampled_from(ENDPOINTS)


@dataclass
class Batch:
    """A batch as the provider holds it: paid for once sent."""

    endpoint: str
    keys: list[str]
    ended: bool = False
    unjournaled: bool = False
    """Its collector was killed before writing a byte of its line: nothing says it was sent."""


@dataclass
class Line:
    data: bytes
    valid: bool


class Said(logging.Handler):
    """What the driver says as it recovers the journal."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


class BatchJournalMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="redraft-journal-machine-"))
        self.store = RunStore.open(self.tmp / "run", manifest())
        self.path = self.store.root / JOURNAL
        self.api = MemoryBatches()
        self.run = BatchRun(uid=self.store.run_uid, since=0.0)
        self.batches: dict[str, Batch] = {}
        self.lines: list[Line] = []
        self.set_aside = b""
        self.keys = 0
        self.paid: Counter[str] = Counter()
        self.excused: Counter[str] = Counter()
        self.said = Said()
        self.stopped = False
        """The run is stopped: what befalls its directory now is found when the driver starts it again."""
        logging.getLogger("redraft.actors._batches").addHandler(self.said)

    def teardown(self) -> None:
        logging.getLogger("redraft.actors._batches").removeHandler(self.said)
        self.store.finish(0.0)
        shutil.rmtree(self.tmp, ignore_errors=True)

    @initialize(keeps_metadata=st.booleans())
    def provider(self, keeps_metadata: bool) -> None:
        """OpenAI's batches carry the run's id; Anthropic's carry none."""
        self.api.keeps_metadata = keeps_metadata
        self.store.sends_batches()

    # ------------------------------------------------------------ collectors

    def _send(self, endpoint: str, calls: int) -> str:
        keys = [f"k{self.keys + i}" for i in range(calls)]
        self.keys += calls
        batch_id = asyncio.run(self.api.submit([k.encode() for k in keys], metadata(self.run, endpoint)))
        self.batches[batch_id] = Batch(endpoint, keys)
        self.paid.update(keys)
        return batch_id

    def _journal(self, endpoint: str) -> BatchJournal:
        return BatchJournal(self.path, endpoint, self.run.uid)

    def _appended(self, before: int) -> None:
        """Note the line an append wrote (after moving a torn tail aside, as every append does)."""
        if self.lines and not self.lines[-1].valid and not self.lines[-1].data.endswith(b"\n"):
            self.set_aside += self.lines.pop().data
        data = self.path.read_bytes()
        self.lines.append(Line(data[sum(len(line.data) for line in self.lines) :], valid=True))
        assert self.lines[-1].data.endswith(b"\n")

    @precondition(lambda self: not self.stopped)
    @rule(endpoint=endpoints, calls=st.integers(1, 4))
    def send(self, endpoint: str, calls: int) -> None:
        batch_id = self._send(endpoint, calls)
        before = self.size()
        self._journal(endpoint).submitted(batch_id, self.batches[batch_id].keys, 1.0)
        self._appended(before)

    @precondition(lambda self: not self.stopped)
    @rule(endpoint=endpoints, calls=st.integers(1, 4), data=st.data())
    def killed_while_journaling(self, endpoint: str, calls: int, data: st.DataObject) -> None:
        """The collector sent its batch and died before or while writing its line."""
        batch_id = self._send(endpoint, calls)
        keys = self.batches[batch_id].keys
        line = JournalLine(endpoint=endpoint, submitted=batch_id, at=1.0, keys=keys, run=self.run.uid)
        whole = msgspec.json.encode(line) + b"\n"
        cut = data.draw(st.integers(0, len(whole) - 1))
        if cut == 0 or not self.tear(whole[:cut]):
            self.batches[batch_id].unjournaled = True
            self.excused.update(keys)

    def tear(self, data: bytes) -> bool:
        """Leave ``data``, a line cut short, at the journal's end; False if a torn line is there already (a
        collector appends only after cutting one aside)."""
        if self.lines and not self.lines[-1].data.endswith(b"\n"):
            return False
        with open(self.path, "ab") as f:
            f.write(data)
        self.lines.append(Line(data, valid=False))
        return True

    @precondition(lambda self: not self.stopped and any(not b.ended for b in self.batches.values()))
    @rule(data=st.data(), torn=st.booleans())
    def a_batch_ends(self, data: st.DataObject, torn: bool) -> None:
        """Every answer of a batch handed over: its line says so (or its collector dies writing it)."""
        batch_id = data.draw(st.sampled_from(sorted(b for b, batch in self.batches.items() if not batch.ended)))
        batch = self.batches[batch_id]
        batch.ended = True
        if torn:
            self.tear(msgspec.json.encode(JournalLine(endpoint=batch.endpoint, ended=batch_id, run=self.run.uid))[:-5])
            return
        before = self.size()
        self._journal(batch.endpoint).ended(batch_id)
        self._appended(before)

    # ------------------------------------------------------------ damage

    @precondition(lambda self: self.lines)
    @rule(data=st.data())
    def a_line_is_damaged(self, data: st.DataObject) -> None:
        self.stopped = True
        number = data.draw(st.integers(0, len(self.lines) - 1))
        line = self.lines[number]
        body = len(line.data.rstrip(b"\n"))
        at = data.draw(st.integers(0, body - 1))
        line.data = line.data[:at] + b"\0" + line.data[at + 1 :]
        line.valid = False
        self.write_lines()

    @rule(endpoint=endpoints)
    def a_line_of_another_run(self, endpoint: str) -> None:
        self.stopped = True
        foreign = JournalLine(endpoint=endpoint, ended="batch_x", run="another-run")
        if self.lines and not self.lines[-1].data.endswith(b"\n"):
            return
        self.lines.append(Line(msgspec.json.encode(foreign) + b"\n", valid=False))
        self.write_lines()

    @rule(how=st.sampled_from(["deleted", "emptied"]))
    def the_journal_is_lost(self, how: str) -> None:
        self.stopped = True
        if how == "deleted":
            self.path.unlink(missing_ok=True)
        else:
            self.path.write_bytes(b"")
        self.lines = []

    # ------------------------------------------------------------ restarts and resumes

    @precondition(lambda self: not self.stopped)
    @rule(endpoint=endpoints)
    def a_collector_is_restarted(self, endpoint: str) -> None:
        """Ray restarts a killed collector mid-run: it reads the journal as it is (the driver recovers it only
        when a run starts)."""
        self.follows(endpoint, self.run)

    @rule()
    def the_driver_resumes(self) -> None:
        """The run is started again: the driver recovers the journal, then each collector resumes."""
        self.said.lines.clear()
        self.stopped = False
        self.run = batch_run(self.store)
        moved = b"".join(line.data for line in self.lines if not line.valid)
        self.set_aside += moved
        bad = sum(not line.valid for line in self.lines)
        assert self.damaged() == self.set_aside
        said = [line for line in self.said.lines if line.startswith(f"{JOURNAL}: kept")]
        assert said == ([] if not bad else [said[0]]) and (not bad or f"set aside {bad} line" in said[0])
        self.lines = [line for line in self.lines if line.valid]
        assert not self.path.exists() or self.path.read_bytes() == b"".join(line.data for line in self.lines)
        for endpoint in ENDPOINTS:
            self.follows(endpoint, self.run)

    def follows(self, endpoint: str, run: BatchRun) -> None:
        """The collector's resume follows every open batch of its endpoint, the rest of its calls sent again."""
        found = {left.batch_id for left in asyncio.run(left_open(self._journal(endpoint), self.api, run, endpoint))}
        assert found <= set(self.batches)
        for batch_id, batch in list(self.batches.items()):
            if batch.endpoint != endpoint or batch.ended or batch_id in found:
                continue
            assert batch.unjournaled, f"{batch_id} is open at the provider and not followed: its calls paid again"
            batch.ended = True  # given up: its calls sent again, in a new batch
            again = self._send(endpoint, 0)
            self.batches[again].keys = batch.keys
            self.paid.update(batch.keys)
            before = self.size()
            self._journal(endpoint).submitted(again, batch.keys, 1.0)
            self._appended(before)

    @invariant()
    def no_call_is_paid_twice_but_those_in_flight_at_a_kill(self) -> None:
        for key, paid in self.paid.items():
            assert paid <= 1 + self.excused[key], key

    def write_lines(self) -> None:
        self.path.write_bytes(b"".join(line.data for line in self.lines))

    def size(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def damaged(self) -> bytes:
        path = self.path.with_name(JOURNAL + ".damaged")
        return path.read_bytes() if path.exists() else b""


BatchJournalMachine.TestCase.settings = MACHINE
test_provider_batches_are_followed_never_paid_twice_and_what_is_set_aside_is_named = BatchJournalMachine.TestCase
