"""People's judgements of a directory's answers: ``labels.jsonl``, one JSON line per judgement, appended, never
rewritten.

A judgement is a `Label` (a person's verdict on one task's answer: pass or fail, maybe a score and a comment) or a
`Preference` (which of two arms' answers to one task a person preferred, or a tie). Each names the answer it
judged by its digest (`answer_digest`), so a label on an answer that has since changed (a resume redid the task)
is told apart from a label on the answer the directory holds now (`Judgements.current`).

Appends write this file only (``O_APPEND`` under ``flock``, a torn tail sealed, never the directory's
``writer.lock``); reads are record by record and write nothing; the file's order says which label is latest.
See docs/architecture.md, section "People's judgements: labels.jsonl".
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import msgspec

from redraft.errors import JudgementError
from redraft.jsonlines import Line, Refused, scan
from redraft.plaintext import plain_text
from redraft.rundir.reader import RunReader

LABELS = "labels.jsonl"
"""The judgements' file, in the directory whose answers they judge."""
VERSION = 1
"""The format version each line carries (``v``)."""
MAX_REVIEWER = 200
"""Characters a reviewer's name may hold."""
MAX_COMMENT = 10_000
"""Characters a comment may hold."""
MAX_SHOWN = 32
"""Entries a label's ``shown`` may hold (each key and value up to `MAX_REVIEWER` characters)."""

Verdict = Literal["pass", "fail"]
Choice = Literal["A", "B", "tie"]
_DIGEST = re.compile(r"[0-9a-f]{64}")


def answer_digest(text: str) -> str:
    """The sha256 (hex) of an answer's UTF-8 text, made plain first (`redraft.plaintext.plain_text`)."""
    return hashlib.sha256(plain_text(text).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Label:
    """A person's verdict on one task's answer. Checked and made plain when made: an invalid one is never held
    (`redraft.errors.JudgementError`, a `ValueError`)."""

    task_id: str
    reviewer: str
    """Who judged: a name, not empty, up to `MAX_REVIEWER` characters."""
    verdict: Verdict
    answer_digest: str
    """The judged answer's `answer_digest`."""
    score: float | None = None
    """A grade in [0, 1], when the reviewer gave one."""
    comment: str = ""
    """Up to `MAX_COMMENT` characters."""
    shown: Mapping[str, str] = field(default_factory=dict)
    """What the page showed when the judgement was made: ``{"page": "task"}``, ``{"page": "queue", "seed": "7"}``."""
    at: float = 0.0
    """When (unix time); 0 means now, filled in when appended."""

    def __post_init__(self) -> None:
        _set(self, "task_id", _task_id(self.task_id))
        _set(self, "reviewer", _reviewer(self.reviewer))
        if self.verdict not in ("pass", "fail"):
            raise JudgementError(f"a label's verdict is 'pass' or 'fail', not {self.verdict!r}")
        _digest(self.answer_digest)
        if self.score is not None:
            if isinstance(self.score, bool) or not 0.0 <= self.score <= 1.0:
                raise JudgementError(f"a label's score is a number in [0, 1], not {self.score!r}")
            _set(self, "score", float(self.score))
        _set(self, "comment", _text(self.comment, "comment", MAX_COMMENT))
        _set(self, "shown", _shown(self.shown))
        _set(self, "at", _at(self.at))


@dataclass(frozen=True)
class Preference:
    """Which of two arms' answers to one task a person preferred: ``A`` (the first shown), ``B``, or a tie."""

    task_id: str
    reviewer: str
    shown: tuple[str, str]
    """The two arms' names in the order shown, A then B."""
    digests: tuple[str, str]
    """Their answers' `answer_digest`, in the same order."""
    choice: Choice
    at: float = 0.0
    """When (unix time); 0 means now, filled in when appended."""

    def __post_init__(self) -> None:
        _set(self, "task_id", _task_id(self.task_id))
        _set(self, "reviewer", _reviewer(self.reviewer))
        if len(self.shown) != 2 or len(self.digests) != 2:
            raise JudgementError("a preference shows two arms, each with its answer's digest")
        first, second = (_text(arm, "an arm's name", MAX_REVIEWER) for arm in self.shown)
        if not first or not second or first == second:
            raise JudgementError(f"a preference is between two arms, named and different, not {self.shown!r}")
        _set(self, "shown", (first, second))
        _set(self, "digests", (_digest(self.digests[0]), _digest(self.digests[1])))
        if self.choice not in ("A", "B", "tie"):
            raise JudgementError(f"a preference's choice is 'A', 'B' or 'tie', not {self.choice!r}")
        _set(self, "at", _at(self.at))

    @property
    def winner(self) -> str | None:
        """The preferred arm's name; None for a tie."""
        return {"A": self.shown[0], "B": self.shown[1]}.get(self.choice)


def _set(record: object, name: str, value: object) -> None:
    object.__setattr__(record, name, value)  # a frozen record, made plain and checked once, as it is made


def _text(text: str, what: str, limit: int) -> str:
    if not isinstance(text, str):
        raise JudgementError(f"{what} is text, not {type(text).__name__}")
    if len(text) > limit:
        raise JudgementError(f"{what} holds {len(text)} characters; at most {limit}")
    return plain_text(text)


def _task_id(task_id: str) -> str:
    if not (task_id := _text(task_id, "a task id", MAX_COMMENT)):
        raise JudgementError("a judgement names its task")
    return task_id


def _reviewer(reviewer: str) -> str:
    if not (reviewer := _text(reviewer, "a reviewer's name", MAX_REVIEWER)).strip():
        raise JudgementError("a judgement names its reviewer")
    return reviewer


def _digest(digest: str) -> str:
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise JudgementError(f"an answer's digest is 64 hex digits (answer_digest), not {digest!r}")
    return digest


def _shown(shown: Mapping[str, str]) -> dict[str, str]:
    if len(shown) > MAX_SHOWN:
        raise JudgementError(f"what was shown holds {len(shown)} entries; at most {MAX_SHOWN}")
    return {_text(k, "a shown key", MAX_REVIEWER): _text(v, "a shown value", MAX_REVIEWER) for k, v in shown.items()}


def _at(at: float) -> float:
    if isinstance(at, bool) or not isinstance(at, int | float) or not 0.0 <= at < float("inf"):
        raise JudgementError(f"a judgement's time is unix seconds, not {at!r}")
    return float(at)


class _Line(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    v: int = VERSION
    task_id: str
    reviewer: str
    at: float


class _LabelLine(_Line, frozen=True, kw_only=True, tag="label"):
    verdict: Verdict
    answer_digest: str
    score: float | None = None
    comment: str = ""
    shown: dict[str, str] = {}


class _PreferenceLine(_Line, frozen=True, kw_only=True, tag="preference"):
    shown: tuple[str, str]
    digests: tuple[str, str]
    choice: Choice


_decoder = msgspec.json.Decoder(_LabelLine | _PreferenceLine)
_encoder = msgspec.json.Encoder()


def _decode(data: bytes) -> Label | Preference:
    line = _decoder.decode(data)
    fields = {name: getattr(line, name) for name in line.__struct_fields__ if name != "v"}
    try:
        return Label(**fields) if isinstance(line, _LabelLine) else Preference(**fields)
    except JudgementError as exc:
        raise Refused("wrong shape", str(exc)) from None


def append_label(directory: Path, label: Label, *, clock: Callable[[], float] = time.time) -> Label:
    """Append ``label`` to ``directory/labels.jsonl`` (see the module docstring); the label as written (its time
    filled in when it had none)."""
    written = label if label.at else replace(label, at=clock())
    fields = {name: getattr(written, name) for name in _LabelLine.__struct_fields__ if name != "v"}
    _append(directory, _encoder.encode(_LabelLine(**fields)) + b"\n")
    return written


def append_preference(directory: Path, preference: Preference, *, clock: Callable[[], float] = time.time) -> Preference:
    """Append ``preference`` to ``directory/labels.jsonl`` (see the module docstring); the preference as written."""
    written = preference if preference.at else replace(preference, at=clock())
    fields = {name: getattr(written, name) for name in _PreferenceLine.__struct_fields__ if name != "v"}
    _append(directory, _encoder.encode(_PreferenceLine(**fields)) + b"\n")
    return written


def _append(directory: Path, line: bytes) -> None:
    """Write ``line`` at the end of the directory's ``labels.jsonl``, under ``flock``, sealing a torn tail first."""
    if not directory.is_dir():
        raise JudgementError(f"{directory}: no such directory to record a judgement in")
    path = directory / LABELS
    made = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # the torn tail becomes a line of its own, which readers set aside
        while line:
            line = line[os.write(fd, line) :]
        os.fsync(fd)
    finally:
        os.close(fd)  # closing drops the flock
    if made:
        _sync_directory(directory)


def _sync_directory(directory: Path) -> None:
    """Make the new file's name durable, as its contents are."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class Judgements:
    """What a directory's ``labels.jsonl`` holds: every record in the file's order, and how many lines were not
    records."""

    labels: list[Label] = field(default_factory=list)
    preferences: list[Preference] = field(default_factory=list)
    set_aside: int = 0
    """Lines skipped: torn, not JSON, or not a judgement."""

    def latest_labels(self) -> dict[str, Label]:
        """Per task id, its latest label (the file's order)."""
        return {label.task_id: label for label in self.labels}

    def current(self, answers: Mapping[str, str]) -> dict[str, Label]:
        """Per task of ``answers`` (task id -> its current final answer's text), the latest label on that answer;
        a label on an answer the task no longer holds does not count, and a task without one is left out."""
        digests = {task_id: answer_digest(text) for task_id, text in answers.items()}
        return {label.task_id: label for label in self.labels if digests.get(label.task_id) == label.answer_digest}

    def latest_preferences(self) -> dict[tuple[str, str, str], Preference]:
        """Per task and pair of arms (``(task_id, arm, arm)``, the arms sorted), its latest preference."""
        latest: dict[tuple[str, str, str], Preference] = {}
        for preference in self.preferences:
            first, second = sorted(preference.shown)
            latest[(preference.task_id, first, second)] = preference
        return latest


def read_judgements(directory: Path) -> Judgements:
    """The judgements in ``directory/labels.jsonl``, read record by record (an empty one when there is no file)."""
    found = Judgements()
    for item in scan(directory / LABELS, _decode):
        if not isinstance(item, Line):
            found.set_aside += 1
        elif isinstance(item.record, Label):
            found.labels.append(item.record)
        else:
            found.preferences.append(item.record)
    return found


def final_answers(run: Path) -> dict[str, str]:
    """Each finished task's final answer in the run at ``run`` (its `Result.text`), for the tasks that ended with
    one (a final round, or a text where the record names no round): what a label on the task judges now."""
    finished = RunReader(run).finished()
    return {result.task_id: result.text for result in finished if result.best_round is not None or result.text}


def current_labels(run: Path) -> dict[str, Label]:
    """The people's labels of the run at ``run`` that stand: per task, the latest on the answer it holds now."""
    return read_judgements(run).current(final_answers(run))
