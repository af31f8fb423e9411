"""JSON-lines journals read record by record: a damaged line costs that line, never the lines after it.

Every file redraft appends to a line at a time (a run's ``results.jsonl``, its
``batches.jsonl``, a tune's ``tune.jsonl``) is read by one rule, SQLite's and
Postgres's promise that a torn write loses the torn record only:

A line is a record if it ends with a newline and its journal's decoder takes it; any other line is set
aside (a reader skips it; a writer's recovery moves it to ``NAME.damaged`` and says so in one line), and the
records after it are kept. An append first moves a torn tail aside, under an exclusive lock on the file.

This module is a room of its own and imports nothing of redraft: the backends' batch
journal, the run directory and the tune each keep a journal, and the backends may not
import the run directory.

See docs/architecture.md, section "Journals read record by record".
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Generic, Literal, TypeVar

import msgspec

T = TypeVar("T")
log = logging.getLogger(__name__)

Why = Literal["torn", "unreadable", "wrong shape", "another run"]
"""Why a line was set aside: cut short at the end of the file, not JSON, JSON that is not a record of
the journal, or a record of another run's journal."""
DAMAGED = ".damaged"
"""The suffix of the file beside a journal that holds what was set aside from it."""
_SHOWN = 3
"""Set-aside lines a recovery's line names one by one (the rest are counted)."""


class Refused(Exception):
    """Raised by a journal's decoder for a whole, well-formed line that is not one of its records."""

    def __init__(self, why: Why, detail: str = "") -> None:
        super().__init__(detail or why)
        self.why, self.detail = why, detail

    def __reduce__(self) -> tuple[type[Refused], tuple[Why, str]]:
        return (Refused, (self.why, self.detail))


@dataclass(frozen=True, slots=True)
class Line(Generic[T]):
    """A line that is a record."""

    record: T
    number: int
    """1 for the first line."""
    offset: int
    """Where it begins in the file."""
    data: bytes
    """Its bytes, newline included."""


@dataclass(frozen=True, slots=True)
class SetAside:
    """A line that is not a record."""

    number: int
    """0 when not counted (a torn tail an append found)."""
    offset: int
    data: bytes
    why: Why
    detail: str = ""
    """What the decoder said (for a wrong shape, the field and the type it found)."""

    def said(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        where = f"line {self.number}" if self.number else "the last line"
        return f"{where} (byte {self.offset}) {self.why}{detail}"


@dataclass
class Recovery:
    """What recovering a journal kept and set aside; `line` says it."""

    path: Path
    kept: int = 0
    set_aside: list[SetAside] = field(default_factory=list)
    """Their bytes are in ``NAME.damaged`` (kept here only for the first few, to name them)."""
    count: int = 0
    """Lines set aside, all of them."""

    def note(self, aside: SetAside) -> None:
        self.count += 1
        if len(self.set_aside) < _SHOWN:
            self.set_aside.append(SetAside(aside.number, aside.offset, b"", aside.why, aside.detail))

    def line(self) -> str | None:
        """``NAME: kept K, set aside N lines: ... (moved to NAME.damaged)``, or None when nothing was set aside."""
        if not self.count:
            return None
        shown = "; ".join(aside.said() for aside in self.set_aside)
        more = f"; and {self.count - len(self.set_aside)} more" if self.count > len(self.set_aside) else ""
        lines = "line" if self.count == 1 else "lines"
        return (
            f"{self.path.name}: kept {self.kept}, set aside {self.count} {lines}: {shown}{more} "
            f"(moved to {damaged_path(self.path).name})"
        )


def damaged_path(path: Path) -> Path:
    return path.with_name(path.name + DAMAGED)


def scan(path: Path, decode: Callable[[bytes], T], *, offset: int = 0, number: int = 0) -> Iterator[Line[T] | SetAside]:
    """Every line of ``path`` as a record or as set aside, streamed (nothing if there is no file); from byte
    ``offset``, the line after line ``number``, when given (a reader that has read the lines before)."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below, once the generator is done
    except FileNotFoundError:
        return
    with handle:
        handle.seek(offset)
        for at, data in enumerate(handle, number + 1):
            if data.strip():
                yield _read(data, at, offset, decode)
            offset += len(data)


def _read(data: bytes, number: int, offset: int, decode: Callable[[bytes], T]) -> Line[T] | SetAside:
    if not data.endswith(b"\n"):
        return SetAside(number, offset, data, "torn")
    try:
        return Line(decode(data), number, offset, data)
    except msgspec.ValidationError as exc:
        return SetAside(number, offset, data, "wrong shape", str(exc))
    except msgspec.DecodeError:
        return SetAside(number, offset, data, "unreadable")
    except RecursionError:  # nested deeper than a decoder goes (an untyped decode of a hostile line)
        return SetAside(number, offset, data, "unreadable", "nested too deep")
    except Refused as exc:
        return SetAside(number, offset, data, exc.why, exc.detail)


def records(path: Path, decode: Callable[[bytes], T]) -> Iterator[T]:
    """The records of ``path``, what is not one skipped: a reader's view, which writes nothing."""
    for item in scan(path, decode):
        if isinstance(item, Line):
            yield item.record


def recover(path: Path, decode: Callable[[bytes], T]) -> tuple[list[T], Recovery]:
    """The records of ``path``, with every line that is not one moved to ``NAME.damaged`` and the journal
    replaced by its records (untouched when every line is one). For journals that fit in memory."""
    lines = list(scan(path, decode))
    recovery = Recovery(path, kept=sum(isinstance(item, Line) for item in lines))
    damaged = [item for item in lines if isinstance(item, SetAside)]
    if damaged:
        move_aside(path, (item.data for item in damaged))
        replace(path, (item.data for item in lines if isinstance(item, Line)))
        for item in damaged:
            recovery.note(item)
    return [item.record for item in lines if isinstance(item, Line)], recovery


def move_aside(path: Path, data: Iterable[bytes]) -> int:
    """Append ``data`` to ``NAME.damaged`` beside ``path``, flushed; how many bytes."""
    moved = 0
    with open(damaged_path(path), "ab") as out:
        for chunk in data:
            moved += out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return moved


def replace(path: Path, lines: Iterable[bytes]) -> None:
    """Replace ``path`` by ``lines`` (each with its newline), atomically: written aside, synced, renamed."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        for line in lines:
            out.write(line)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def append(path: Path, line: bytes, *, sync: bool = False) -> SetAside | None:
    """Append one record's line (newline included) to ``path``, under an exclusive lock; a torn tail found
    there first is moved to ``NAME.damaged`` and returned. ``sync``: fsync before returning."""
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            torn = _cut_torn_tail(path, handle)
            handle.write(line)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    if torn is not None:
        log.warning("%s: set aside %s before appending (moved to %s)", path.name, torn.said(), damaged_path(path).name)
    return torn


def _cut_torn_tail(path: Path, handle: IO[bytes]) -> SetAside | None:
    """Move the bytes after the file's last newline aside (nothing when it ends with one, or is empty)."""
    size = handle.seek(0, os.SEEK_END)
    start = size
    while start > 0:
        block = max(0, start - 65536)
        handle.seek(block)
        chunk = handle.read(start - block)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            start = block + newline + 1
            break
        start = block
    if start == size:
        return None
    handle.seek(start)
    tail = handle.read()
    move_aside(path, [tail])
    handle.truncate(start)
    handle.seek(0, os.SEEK_END)
    return SetAside(0, start, tail, "torn")
