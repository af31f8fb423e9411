"""The verified prefix: how much of a run directory a resume need not verify again, and how it knows.

Verifying a record (`redraft.rundir._recovery`) decompresses its frames and walks them:
at a million tasks, a minute of work that an undamaged directory repays with nothing.
So the writer vouches, in ``verified.json``, for the prefix of ``results.jsonl`` and of
the trace that a recovery would keep as it is: every line there a record of this run
whose frames are whole (or marked lost), as the one rule reads them. With each prefix it
writes its size and a running CRC-32 of its bytes, the dictionary's CRC, the run's id and
a digest of the `Result` Struct's schema.

A resume trusts the prefix only when all of these still hold (`trusted`): both files at
least that long, their first bytes' CRCs the same, the same dictionary, run id and
schema; it still reads every line there, but as a `Digest` (the few fields a resume
counts), and verifies only the lines after it by the full rule. Anything else (a byte
changed anywhere in the prefix, a file cut short or replaced, the dictionary deleted, a
newer `Result`) and the whole directory is verified as before: the checkpoint saves
time, never changes what a resume keeps or sets aside.

The writer vouches for what it knows (`Running`): the directory as its recovery left it
(all verified), and each task it appends whose frames the rule would keep
(`redraft.rundir.frames.task_span`, on the frames as it writes them). It writes the
checkpoint at open, every `EVERY` tasks and when it closes; once a task it appends would
not be kept, it vouches for nothing more in that invocation.
"""

from __future__ import annotations

import functools
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from redraft.protocols.messages import Result, Usage
from redraft.rundir._blocks import DICTIONARY
from redraft.rundir.layout import RESULTS, TRACE, read_object

VERIFIED = "verified.json"
"""The run directory's file holding the verified prefix."""
EVERY = 1000
"""Tasks appended between two checkpoints: a resume after a kill verifies at most these again."""
FORMAT = 1
_CHUNK = 1 << 20


class Digest(msgspec.Struct, frozen=True):
    """What a resume counts of a record in the verified prefix: whose, whether done, what it spent, its range."""

    task_id: str
    usage: Usage
    error: str | None = None
    error_type: str | None = None
    retried_for: list[str] = []
    trace_start: int | None = None
    trace_end: int | None = None
    trace_lost: bool = False


DIGEST: msgspec.json.Decoder[Digest] = msgspec.json.Decoder(Digest)


@dataclass(frozen=True)
class Prefix:
    """A prefix of the two files: bytes and their CRC-32 each."""

    results: int = 0
    results_crc: int = 0
    trace: int = 0
    trace_crc: int = 0


class Running:
    """The writer's running CRCs of the two files as it appends, and the checkpoint it writes of them."""

    def __init__(self, root: Path, run: str, prefix: Prefix) -> None:
        self._root, self._run, self.prefix = root, run, prefix
        self._vouching = True
        self._since = 0

    @classmethod
    def resumed(cls, root: Path, run: str, kept: Prefix | None) -> Running:
        """The CRCs of the directory as its recovery left it: ``kept`` (a prefix still in place) read on."""
        start = kept or Prefix()
        results_size, results_crc = _crc(root / RESULTS, start.results, start.results_crc)
        trace_size, trace_crc = _crc(root / TRACE, start.trace, start.trace_crc)
        return cls(root, run, Prefix(results_size, results_crc, trace_size, trace_crc))

    def wrote(self, block: bytes, line: bytes, kept: bool) -> None:
        """A task's block and line were appended; ``kept``: a recovery would keep its frames."""
        p = self.prefix
        self.prefix = Prefix(
            p.results + len(line), zlib.crc32(line, p.results_crc), p.trace + len(block), zlib.crc32(block, p.trace_crc)
        )
        self._vouching = self._vouching and kept
        self._since += 1
        if self._since >= EVERY:
            self.save()

    def save(self) -> None:
        """Write the checkpoint (atomically), unless a task it could not vouch for was appended. A checkpoint that
        cannot be written costs the next resume time only: the writer vouches for nothing more."""
        if not self._vouching:
            return
        self._since = 0
        try:
            self._write()
        except OSError:
            self._vouching = False

    def _write(self) -> None:
        p = self.prefix
        record = {
            "format": FORMAT,
            "run": self._run,
            "schema": _schema(),
            "dictionary": _dictionary_crc(self._root),
            "results": [p.results, p.results_crc],
            "trace": [p.trace, p.trace_crc],
        }
        tmp = self._root / (VERIFIED + ".tmp")
        tmp.write_bytes(msgspec.json.encode(record))
        os.replace(tmp, self._root / VERIFIED)


def trusted(root: Path, run: str) -> Prefix | None:
    """The verified prefix of the directory at ``root``, if every check of the module's rule holds; else None."""
    saved = read_object(root / VERIFIED)
    try:
        prefix = Prefix(*saved["results"], *saved["trace"])
        same = (saved["format"], saved["run"], saved["schema"]) == (FORMAT, run, _schema())
    except (KeyError, TypeError):
        return None
    if not same or saved.get("dictionary") != _dictionary_crc(root):
        return None
    for path, size, crc in (
        (root / RESULTS, prefix.results, prefix.results_crc),
        (root / TRACE, prefix.trace, prefix.trace_crc),
    ):
        if not isinstance(size, int) or _size(path) < size or _crc(path, 0, 0, size) != (size, crc):
            return None
    return prefix


def _crc(path: Path, start: int, crc: int, stop: int | None = None) -> tuple[int, int]:
    """The size and CRC-32 of ``path``'s bytes up to ``stop`` (its end), read on from ``start`` whose CRC is
    ``crc``; a file shorter than ``start`` is read from its beginning."""
    if _size(path) < start:
        start, crc = 0, 0
    try:
        with open(path, "rb") as f:
            f.seek(start)
            size = start
            while chunk := f.read(_CHUNK if stop is None else min(_CHUNK, stop - size)):
                crc, size = zlib.crc32(chunk, crc), size + len(chunk)
    except FileNotFoundError:
        return 0, 0
    return size, crc


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return -1


def _dictionary_crc(root: Path) -> int | None:
    try:
        return zlib.crc32((root / DICTIONARY).read_bytes())
    except FileNotFoundError:
        return None


@functools.cache
def _schema() -> int:
    """A digest of the `Result` Struct's schema: a version that reads records otherwise verifies them again."""
    schema: Any = msgspec.json.schema(Result)
    return zlib.crc32(msgspec.json.encode(schema))
