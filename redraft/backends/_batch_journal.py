"""``batches.jsonl``: the run's record of its provider batches, and what a resume follows (`left_open`).

A line (`JournalLine`) says a batch was submitted (its id, when, its lines' keys: each
request's response-cache key, which is also its custom id at the provider) or ended
(every answer handed over), for one endpoint, stamped with the run directory's id.
Lines are appended under a lock and fsynced, and read record by record
(`redraft.jsonlines`): the driver recovers the journal once before the collectors
start (`recover_journal`: a torn, unreadable or wrong-shape line, or one of another
run, is moved to ``batches.jsonl.damaged`` and said in one line); a collector reads
it without writing, skipping what is not a record.

A journal that was damaged or deleted cannot vouch for itself: a resume then also follows every batch of this run
in the provider's own list that the journal does not record as ended, so no call is paid for twice.

See docs/architecture.md, section "A lost batch journal: the provider's own list".
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from redraft.backends._batch_apis import BatchAPI
from redraft.errors import BackendError
from redraft.jsonlines import Recovery, Refused, SetAside, append, damaged_path, records, recover, scan

log = logging.getLogger(__name__)

JOURNAL = "batches.jsonl"
"""The run directory's record of the batches sent: one JSON line per batch submitted and per batch ended."""
RUN_KEY, ENDPOINT_KEY = "redraft_run", "redraft_endpoint"
"""The metadata a batch is sent with, where the provider keeps it: whose run, which endpoint."""


class JournalLine(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A batch submitted (``submitted``, ``at``, ``keys``) or ended (``ended``), for one endpoint."""

    endpoint: str
    submitted: str | None = None
    at: float | None = None
    """Wall-clock seconds (the journal outlives the process)."""
    keys: list[str] | None = None
    ended: str | None = None
    run: str | None = None
    """The run directory's id (`BatchRun.uid`); absent from lines written before it was recorded."""

    def __post_init__(self) -> None:
        if (self.submitted is None) == (self.ended is None):
            raise ValueError("a line says a batch was submitted, or that it ended")
        if self.submitted is not None and (self.at is None or self.keys is None):
            raise ValueError("a batch submitted needs its time (at) and its keys")


class BatchRun(msgspec.Struct, frozen=True, kw_only=True):
    """Whose batches a collector sends and follows."""

    uid: str
    """The run directory's id (its manifest's ``run_uid``): in the journal's lines and each batch's metadata."""
    since: float
    """When the run began (wall-clock seconds): older batches in the provider's list are not its own."""
    journal_lost: bool = False
    """The journal was damaged or deleted: on resume, the provider's list is read too (the module docstring)."""


@dataclass(frozen=True)
class LeftOpen:
    """A batch an earlier invocation left to follow."""

    batch_id: str
    keys: list[str] | None
    """None for a batch found in the provider's list only: its keys are known once its results are read."""
    submitted_at: float
    owned: bool
    """Known to be this run's (the journal, or the metadata): it may be cancelled. Otherwise only followed."""


class BatchJournal:
    """``batches.jsonl`` as one endpoint of one run reads and appends it."""

    def __init__(self, path: Path, endpoint: str, run: str | None = None) -> None:
        self._path, self._endpoint, self._run = path, endpoint, run

    def _decode(self, data: bytes) -> JournalLine:
        return decode_line(data, self._run)

    def lines(self) -> Iterator[JournalLine]:
        """The endpoint's records, what is not one skipped (the driver set it aside before the run began)."""
        return (line for line in records(self._path, self._decode) if line.endpoint == self._endpoint)

    def open_batches(self) -> dict[str, tuple[list[str], float]]:
        """The endpoint's batches submitted and not ended, by id: (keys, submitted at)."""
        opened: dict[str, tuple[list[str], float]] = {}
        for line in self.lines():
            if line.submitted is not None and line.keys is not None and line.at is not None:
                opened[line.submitted] = (line.keys, line.at)
            elif line.ended is not None:
                opened.pop(line.ended, None)
        return opened

    def intact(self) -> bool:
        """Whether every line is a record and none was ever set aside: a collector that Ray restarted after it died
        mid-line finds its last line torn, and the batch of that line may be out at the provider. Once another
        endpoint's collector has appended, the torn line is in ``batches.jsonl.damaged`` instead, and the journal
        reads whole: only that file says a batch's line was lost."""
        if damaged_path(self._path).exists():
            return False
        return not any(isinstance(item, SetAside) for item in scan(self._path, self._decode))

    def found_lost(self) -> None:
        """Remember that the journal was found lost (deleted, emptied, lines set aside): ``batches.jsonl.damaged``
        is made if missing, so that every later resume looks in the provider's list too (`intact`). A batch found
        only there is journaled when it ends; a run killed again before that would otherwise pay for it twice."""
        damaged_path(self._path).touch()

    def named(self) -> set[str]:
        """Every batch of the endpoint the journal names, open or ended."""
        return {line.submitted or line.ended or "" for line in self.lines()}

    def submitted(self, batch_id: str, keys: list[str], at: float) -> None:
        self._append(JournalLine(endpoint=self._endpoint, submitted=batch_id, at=at, keys=keys, run=self._run))

    def ended(self, batch_id: str) -> None:
        self._append(JournalLine(endpoint=self._endpoint, ended=batch_id, run=self._run))

    def _append(self, line: JournalLine) -> None:
        append(self._path, msgspec.json.encode(line) + b"\n", sync=True)


_decoder = msgspec.json.Decoder(JournalLine)


def decode_line(data: bytes, run: str | None) -> JournalLine:
    """One journal line; `Refused` if another run's (a line without a run is an older writer's: taken)."""
    line = _decoder.decode(data)
    if run is not None and line.run is not None and line.run != run:
        raise Refused("another run", f"run {line.run}, not this directory's {run}")
    return line


def recover_journal(path: Path, run: str | None) -> Recovery:
    """Set aside every line of ``path`` that is not a record of run ``run`` (`redraft.jsonlines.recover`); for
    the driver, before any collector reads or appends."""
    return recover(path, lambda data: decode_line(data, run))[1]


def endpoint_tag(endpoint: str) -> str:
    """The endpoint's name in a batch's metadata: a hash (a spec may name a host the metadata need not)."""
    return hashlib.blake2b(endpoint.encode(), digest_size=6).hexdigest()


def metadata(run: BatchRun | None, endpoint: str) -> dict[str, str]:
    """What a batch is sent with: whose run it is, for which endpoint (nothing for a collector with no run)."""
    return {} if run is None else {RUN_KEY: run.uid, ENDPOINT_KEY: endpoint_tag(endpoint)}


async def left_open(journal: BatchJournal | None, api: BatchAPI, run: BatchRun | None, endpoint: str) -> list[LeftOpen]:
    """The batches to follow on resume: the journal's open ones, and, when the journal is lost (or has a line that
    does not read: a collector restarted mid-line), those of the provider's list that may be this run's and that
    the journal does not name. A list that does not read leaves the journal's alone, said in a warning."""
    found = [LeftOpen(b, keys, at, owned=True) for b, (keys, at) in (journal.open_batches() if journal else {}).items()]
    if run is not None and run.journal_lost and journal is not None:
        journal.found_lost()
    torn = run is not None and not run.journal_lost and journal is not None and not journal.intact()
    if run is None or not (run.journal_lost or torn):
        return found
    if torn:
        log.warning(
            "%s: a line of the batch journal does not read or was set aside: looking in the provider's list", endpoint
        )
    try:
        listed = await api.listed(run.since)
    except BackendError as exc:
        log.warning("%s: could not list the provider's batches: %s; calls may be sent again", endpoint, exc)
        return found
    named = journal.named() if journal is not None else set()
    tag = endpoint_tag(endpoint)
    for batch in (b for b in listed if b.id not in named):
        if batch.metadata is None:  # the provider keeps none: this run's or not, its custom ids will say
            found.append(LeftOpen(batch.id, None, batch.created_at, owned=False))
        elif batch.metadata.get(RUN_KEY) == run.uid and batch.metadata.get(ENDPOINT_KEY) == tag:
            found.append(LeftOpen(batch.id, None, batch.created_at, owned=True))
    return found
