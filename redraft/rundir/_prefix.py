"""The verified prefix: how much of a run directory a resume need not verify again, and how it knows.

The writer vouches, in ``verified.json``, for the prefix of ``results.jsonl`` and of the trace that a recovery
would keep as it is (sizes, running CRC-32s, the dictionary's CRC, the run's id, the `Result` schema's digest,
what the prefix spent). A resume trusts it only when all of these still hold; then it reads the prefix's lines
as light digests and verifies the rest by the full rule; anything else and the whole directory is verified as
before. The checkpoint saves time, never changes what a resume keeps or sets aside.
See docs/architecture.md, section "The verified prefix".
"""

from __future__ import annotations

import functools
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec

from redraft.protocols.messages import Result, Usage
from redraft.rundir._blocks import DICTIONARY
from redraft.rundir._results import After, is_infrastructure_failure
from redraft.rundir.layout import RESULTS, TRACE, read_object

VERIFIED = "verified.json"
"""The run directory's file holding the verified prefix."""
EVERY = 1000
"""Tasks appended between two checkpoints: a resume after a kill verifies at most these again."""
FORMAT = 1
_CHUNK = 1 << 20


class Digest(msgspec.Struct, frozen=True):
    """What a resume reads of a record in the verified prefix: whose, whether done, its range."""

    task_id: str
    error: str | None = None
    error_type: str | None = None
    retried_for: list[str] = []
    trace_start: int | None = None
    trace_end: int | None = None
    trace_lost: bool = False


_DIGESTS = msgspec.json.Decoder(list[Digest])
_DIGEST = msgspec.json.Decoder(Digest)


@dataclass(frozen=True)
class Prefix:
    """A prefix of the two files: bytes and their CRC-32 each, and what its records spent."""

    results: int = 0
    results_crc: int = 0
    trace: int = 0
    trace_crc: int = 0
    spent: Usage = field(default_factory=Usage)
    """The usage of its records but the machinery's failures (`redraft.rundir._results.is_infrastructure_failure`)."""


@dataclass
class Digested:
    """What the records of a verified prefix hold, as a recovery counts them."""

    done: set[str] = field(default_factory=set)
    kept: int = 0
    """Records (every line of the prefix is one)."""
    lost: int = 0
    """Records whose frames are marked lost."""
    traced_end: int = 0
    """Just past the frames of the last record whose frames are whole."""
    after: After = field(default_factory=After)
    """Where the lines after the prefix begin."""


class Running:
    """The writer's running CRCs of the two files as it appends, and the checkpoint it writes of them."""

    def __init__(self, root: Path, run: str, prefix: Prefix) -> None:
        self._root, self._run, self.prefix = root, run, prefix
        self._vouching = True
        self._since = 0

    @classmethod
    def resumed(cls, root: Path, run: str, kept: Prefix | None, spent: Usage) -> Running:
        """The directory as its recovery left it (its records spent ``spent``): ``kept``, a prefix still in
        place, read on."""
        start = kept or Prefix()
        results_size, results_crc = _crc(root / RESULTS, start.results, start.results_crc)
        trace_size, trace_crc = _crc(root / TRACE, start.trace, start.trace_crc)
        return cls(root, run, Prefix(results_size, results_crc, trace_size, trace_crc, spent))

    def wrote(self, block: bytes, line: bytes, result: Result, kept: bool) -> None:
        """A task's block and line were appended; ``kept``: a recovery would keep its frames."""
        p = self.prefix
        spent = p.spent if is_infrastructure_failure(result) else p.spent + result.usage
        self.prefix = Prefix(
            p.results + len(line),
            zlib.crc32(line, p.results_crc),
            p.trace + len(block),
            zlib.crc32(block, p.trace_crc),
            spent,
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
            "spent": p.spent,
        }
        tmp = self._root / (VERIFIED + ".tmp")
        tmp.write_bytes(msgspec.json.encode(record))
        os.replace(tmp, self._root / VERIFIED)


def trusted(root: Path, run: str) -> Prefix | None:
    """The verified prefix of the directory at ``root``, if its checkpoint is this run's and this version's, its
    dictionary the same, and the trace's first bytes unchanged (``results.jsonl``'s are checked by `digested`)."""
    saved = read_object(root / VERIFIED)
    try:
        (results, results_crc), (trace, trace_crc) = saved["results"], saved["trace"]
        prefix = Prefix(results, results_crc, trace, trace_crc, msgspec.convert(saved["spent"], Usage))
        same = (saved["format"], saved["run"], saved["schema"]) == (FORMAT, run, _schema())
    except (KeyError, TypeError, ValueError, msgspec.ValidationError):
        return None
    if not same or saved.get("dictionary") != _dictionary_crc(root) or not isinstance(trace, int):
        return None
    if not isinstance(results, int) or _size(root / RESULTS) < results or _size(root / TRACE) < trace:
        return None
    return prefix if _crc(root / TRACE, 0, 0, trace) == (trace, trace_crc) else None


def digested(root: Path, prefix: Prefix) -> Digested | None:
    """The records of the verified prefix, read as digests a chunk of lines at a time; None when its bytes are
    not the ones the checkpoint holds (or do not read as the writer's records)."""
    found, crc = Digested(), 0
    with open(root / RESULTS, "rb") as results:
        try:
            for chunk in _lines(results, prefix.results):
                crc = zlib.crc32(chunk, crc)
                _count(found, chunk)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
    if (found.after.offset, crc) != (prefix.results, prefix.results_crc):
        return None
    return found


def _lines(results: IO[bytes], size: int) -> Iterator[bytes]:
    """The first ``size`` bytes of ``results``, in chunks of whole lines."""
    left, rest = size, b""
    while left > 0 and (data := results.read(min(_CHUNK, left))):
        left -= len(data)
        data = rest + data
        cut = data.rfind(b"\n") + 1
        rest = data[cut:]
        if cut:
            yield data[:cut]
    if rest:
        yield rest


def _count(found: Digested, chunk: bytes) -> None:
    """Count a chunk's records, in the file's order."""
    lines = chunk.count(b"\n")
    try:
        digests = _DIGESTS.decode(b"[" + chunk.rstrip(b"\n").replace(b"\n", b",") + b"]")
    except msgspec.DecodeError:  # a blank line among them: one line at a time
        digests = [_DIGEST.decode(line) for line in chunk.splitlines() if line.strip()]
    if any(d.error for d in digests):
        for d in digests:
            (found.done.discard if is_infrastructure_failure(d) else found.done.add)(d.task_id)
    else:
        found.done.update(d.task_id for d in digests)
    end = found.after.previous_end
    for d in digests:
        start = end if d.trace_start is None else d.trace_start
        end = start if d.trace_end is None else d.trace_end
        if d.trace_lost:
            found.lost += 1
        else:
            found.traced_end = end
    found.kept += len(digests)
    after = found.after
    found.after = After(after.offset + len(chunk), after.number + lines, end)


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
