"""The trace's compressed blocks: each task's frames one zstd frame, against one dictionary per run directory.

A task's frames (MessagePack, back to back) are compressed whole into one zstd frame
(RFC 8878), so its byte range in the trace decodes on its own and damage costs the
tasks whose ranges it touches, never another's. Within a task, the codec's window
stores a candidate's text once however often it travels (its draft, its verify and
critique requests, the next revision's prompt); across tasks, what they share (the
roles' instructions, a scenario's prompt template) is held once in a dictionary that
the writer trains on the run's first `TRAIN_AFTER` tasks and writes to ``trace.dict``
(atomically, before any frame uses it). A frame names its dictionary by id in its
header; the first tasks' frames name none.

A range is told compressed by its first four bytes (zstd's magic number; a MessagePack
frame of the run never begins with them), so a trace an older version wrote raw reads
as before, and is appended to raw. A frame that does not decode (damaged, cut short, its
dictionary lost) is lost like any range that does not hold its task's frames.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import zstandard

MAGIC = b"\x28\xb5\x2f\xfd"
"""A zstd frame's first four bytes."""
DICTIONARY = "trace.dict"
"""The run directory's file holding the dictionary its frames are compressed against."""
LEVEL = 3
"""zstd's level: compresses the reference workload's tasks 36x, at a few hundred MB/s a core."""
TRAIN_AFTER = 64
"""Tasks written before the dictionary is trained on them."""
DICTIONARY_BYTES = 32 << 10
"""The dictionary's size: 32 KiB held the reference workload to 645 bytes a task (112 KiB: 1,036)."""


class BlockWriter:
    """Compresses each task's frames into one zstd frame; trains and saves the run's dictionary once."""

    def __init__(self, root: Path) -> None:
        self._root = root
        dictionary = load_dictionary(root)
        self._samples: list[bytes | bytearray | memoryview[int]] | None = [] if dictionary is None else None
        self._compressor = _compressor(dictionary)

    def compress(self, frames: list[bytes]) -> bytes:
        """One task's frames as one zstd frame."""
        data = b"".join(frames)
        block = self._compressor.compress(data)
        if self._samples is not None:
            self._samples.append(data)
            if len(self._samples) >= TRAIN_AFTER:
                self._train(self._samples)
        return block

    def _train(self, samples: list[bytes | bytearray | memoryview[int]]) -> None:
        self._samples = None
        try:
            dictionary = zstandard.train_dictionary(DICTIONARY_BYTES, samples)
        except zstandard.ZstdError:  # too little to learn from (tiny tasks): frames stay dictionary-less
            return
        path = self._root / DICTIONARY
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(dictionary.as_bytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self._compressor = _compressor(dictionary)


class BlockReader:
    """Decodes tasks' ranges of one run directory's trace: raw ranges as they are, zstd frames decompressed."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._plain = zstandard.ZstdDecompressor()

    def decode(self, data: bytes) -> bytes | None:
        """A range's frames: ``data`` itself when written raw, else its zstd frame decompressed; None when it does
        not decode, or is not exactly one whole zstd frame (another run's trace, a range that spans two)."""
        if not data.startswith(MAGIC):
            return data
        frame = self.stream(data)
        if frame is None:
            return None
        try:
            out = frame.decompress(data)
        except zstandard.ZstdError:
            return None
        return out if frame.eof and not frame.unused_data else None

    def stream(self, head: bytes) -> zstandard.ZstdDecompressionObj | None:
        """A decompressor for the zstd frame ``head`` begins (with the dictionary it names), or None."""
        try:
            wanted = zstandard.get_frame_parameters(head).dict_id
        except zstandard.ZstdError:
            return None
        decompressor = self._dictionary(wanted) if wanted else self._plain
        return None if decompressor is None else decompressor.decompressobj()

    def _dictionary(self, wanted: int) -> zstandard.ZstdDecompressor | None:
        """The decompressor of the run's dictionary, if that is the one ``wanted`` (by id)."""
        found = self._loaded
        return found[1] if found is not None and found[0] == wanted else None

    @functools.cached_property
    def _loaded(self) -> tuple[int, zstandard.ZstdDecompressor] | None:
        """The run's dictionary's id and decompressor, read once (None: the run has none)."""
        dictionary = load_dictionary(self._root)
        return None if dictionary is None else (dictionary.dict_id(), zstandard.ZstdDecompressor(dict_data=dictionary))


def load_dictionary(root: Path) -> zstandard.ZstdCompressionDict | None:
    """The run directory's dictionary, or None when it has none (or it does not read as one)."""
    try:
        data = (root / DICTIONARY).read_bytes()
    except OSError:
        return None
    dictionary = zstandard.ZstdCompressionDict(data)
    return dictionary if dictionary.dict_id() else None


def is_compressed(head: bytes) -> bool:
    """Whether a trace whose first bytes are ``head`` is written in blocks: a new (empty) one is."""
    return not head or head.startswith(MAGIC)


def _compressor(dictionary: zstandard.ZstdCompressionDict | None) -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(level=LEVEL, dict_data=dictionary, write_checksum=True, write_dict_id=True)


class Decoded:
    """The frames that follow in ``trace`` from where it stands, a task's at a time, up to bytes that do not decode
    (the end, a torn frame, damage): raw bytes as they are, zstd frames decompressed one by one. `whole` says,
    once iterated, whether they reached the end."""

    def __init__(self, trace: IO[bytes], reader: BlockReader) -> None:
        self._trace, self._reader = trace, reader
        self.whole = False

    def __iter__(self) -> Iterator[bytes]:
        pending = self._trace.read(_CHUNK)
        while pending:
            if not pending.startswith(MAGIC):  # written raw: the rest is frames as they are
                yield pending
                yield from iter(lambda: self._trace.read(_CHUNK), b"")
                break
            frame = self._reader.stream(pending)
            out = None if frame is None else self._frame(frame, pending)
            if frame is None or out is None:
                return
            yield out
            pending = frame.unused_data or self._trace.read(_CHUNK)
        self.whole = True

    def _frame(self, frame: zstandard.ZstdDecompressionObj, head: bytes) -> bytes | None:
        try:
            out = [frame.decompress(head)]
            while not frame.eof and (more := self._trace.read(_CHUNK)):
                out.append(frame.decompress(more))
        except zstandard.ZstdError:
            return None
        return b"".join(out) if frame.eof else None


_CHUNK = 1 << 16
