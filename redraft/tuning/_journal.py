"""A tune's journal: every candidate, proposal, evaluation and iteration, one JSON line each, as they land.

``tune.jsonl`` under the tune's ``--out`` is appended to (and flushed) as each record lands, so a tune
stopped anywhere resumes from it with the same ``--out``: a recorded evaluation is never run again, a
recorded proposal never asked again, and an iteration cut halfway redoes only what it had not recorded
(an evaluation cut halfway resumes its own run directory, whose finished tasks are not redone).

It is read record by record (`redraft.jsonlines`): a line that is not a record (torn by a crash mid-write,
not JSON, JSON of another shape, or stamped by another tune) is moved to ``tune.jsonl.damaged`` when the
journal opens, said in `TuneJournal.recovery`, and the records after it are kept; what it recorded is done
again. Each record carries its tune's id (`Record.tune`, the tune manifest's), so a journal copied from
another tune's directory is set aside rather than taken for this one's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import msgspec

from redraft.jsonlines import Refused, append, recover
from redraft.protocols.messages import Usage
from redraft.protocols.tuning import Proposal

JOURNAL = "tune.jsonl"


class Stamped(msgspec.Struct, frozen=True, kw_only=True):
    """What every record carries: the tune it belongs to."""

    tune: str | None = None
    """The tune's id (its manifest's ``tune_uid``), stamped by `TuneJournal.add`; None in older journals, and in a
    journal opened without an id (which takes every record)."""


class PromptCandidate(Stamped, tag="candidate", frozen=True, kw_only=True):
    """A version of the prompts: its sections over the built-in ones, and where it came from."""

    id: str
    """``c0`` is the starting prompts; ``c<k>`` the child proposed in iteration k."""
    parent: str | None
    iteration: int | None
    section: str | None
    """The section its edit rewrote (None for the start)."""
    reason: str
    entries: dict[str, tuple[int, str]]
    """Every section that differs from the built-in ones: (version, text)."""
    file: str
    """Its prompts file, relative to the tune's directory."""


class Evaluation(Stamped, tag="evaluation", frozen=True, kw_only=True):
    """One candidate run over one set of tasks: each task's figure, and what it cost."""

    candidate: str
    on: str
    """``validation``, ``test``, or ``minibatch-<k>`` (iteration k's train minibatch)."""
    figures: dict[str, float]
    """Each task's graded figure (its grade; a task that ended in error, 0)."""
    feedback: dict[str, float]
    """Each task's feedback score: what the loop saw."""
    graded: bool
    """The figures are held-out grades (False: the scenario has none, and they are the feedback's)."""
    usage: Usage
    run: str
    """Its run directory, relative to the tune's directory."""
    judge: str | None = None
    """The judge whose rubric scores the figures are (``--judge``); None: the scenario's grade (or its feedback)."""

    @property
    def mean(self) -> float:
        return sum(self.figures.values()) / len(self.figures) if self.figures else 0.0

    @property
    def feedback_mean(self) -> float:
        return sum(self.feedback.values()) / len(self.feedback) if self.feedback else 0.0


class Proposed(Stamped, tag="proposed", frozen=True, kw_only=True):
    """What the proposer answered in one iteration."""

    iteration: int
    parent: str
    proposal: Proposal


class Iteration(Stamped, tag="iteration", frozen=True, kw_only=True):
    """One iteration, ended: the parent, the section, the minibatch, and whether the child was kept."""

    number: int
    parent: str
    section: str
    minibatch: list[str]
    child: str | None
    """None when the edit was refused (or the budget ended the iteration before it)."""
    parent_score: float | None
    child_score: float | None
    kept: bool
    validation: float | None = None
    """The child's mean validation figure, when kept."""
    note: str = ""


Record = PromptCandidate | Evaluation | Proposed | Iteration
"""A journal's line: one of the four, told apart by its ``type``."""
_decoder: msgspec.json.Decoder[Record] = msgspec.json.Decoder(Record)


class TuneJournal:
    """The records of ``directory/tune.jsonl``, read at open, appended to as they land (thread-safe).

    ``tune``: the tune's id, stamped on each record added; a record stamped with another is set aside.
    ``on_record`` is told of each record added (not of those read), after it is written."""

    def __init__(
        self, directory: Path, tune: str | None = None, on_record: Callable[[Record], None] | None = None
    ) -> None:
        self.path = directory / JOURNAL
        self.tune = tune
        self._on_record = on_record
        self.candidates: dict[str, PromptCandidate] = {}
        self.evaluations: dict[tuple[str, str], Evaluation] = {}
        self.proposals: dict[int, Proposed] = {}
        self.iterations: dict[int, Iteration] = {}
        self._lock = threading.Lock()
        found, self.recovery = recover(self.path, self._decode)
        """What opening the journal set aside (`Recovery.line` says it; None when nothing was)."""
        for record in found:
            self._place(record)

    def _decode(self, line: bytes) -> Record:
        record = _decoder.decode(line)
        if self.tune is not None and record.tune is not None and record.tune != self.tune:
            raise Refused("another run", f"tune {record.tune}, not this directory's {self.tune}")
        return record

    def _place(self, record: Record) -> None:
        match record:
            case PromptCandidate():
                self.candidates[record.id] = record
            case Evaluation():
                self.evaluations[(record.candidate, record.on)] = record
            case Proposed():
                self.proposals[record.iteration] = record
            case Iteration():
                self.iterations[record.number] = record

    def add(self, record: Record) -> None:
        """Record ``record``: in memory, and as one line appended to the journal and flushed."""
        if self.tune is not None:
            record = msgspec.structs.replace(record, tune=self.tune)
        with self._lock:
            append(self.path, msgspec.json.encode(record) + b"\n")
            self._place(record)
        if self._on_record is not None:  # outside the lock: the listener may read the journal
            self._on_record(record)

    def spent(self) -> Usage:
        """Every recorded evaluation's usage and every proposal's: what the tune has paid for."""
        with self._lock:
            usages = [e.usage for e in self.evaluations.values()] + [p.proposal.usage for p in self.proposals.values()]
        return sum(usages, Usage())
