"""Bounds on what redraft decodes: no reply, frame or line is decoded past a size or a nesting depth.

Invariant: every decoder of text or bytes from outside the process (a model's reply, a frame from
another actor or from the disk, a line of a file a user or a run wrote) is called through `bounded`,
which refuses, before decoding, input over its size or JSON nested deeper than its depth, and turns the
interpreter's own `RecursionError` (msgpack, whose depth is not scanned: frames are on the hot path,
and their typed fields bound them but for the free-form ones) into the same refusal. The refusal is
`TooComplex`, a `msgspec.DecodeError` (so a `ValueError` too): each caller's handling of an unreadable
input applies unchanged, with its documented consequence (a critique that is not one is that
critique's failure; a frame that is not one a `ProtocolError`; a line that is not one set aside).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

import msgspec

MAX_DEPTH = 64
"""JSON nested deeper than this is refused: redraft's own shapes are a few levels deep, a user's data a few
more; the interpreter's recursion limit (about 1,000 levels, fewer deep in a call stack) is never reached."""
MAX_REPLY_BYTES = 1 << 22
"""A model's reply decoded as structured (a critique, a plan, a decision, an edit) is at most 4 MiB."""
MAX_FRAME_BYTES = 1 << 28
"""A protocol frame is at most 256 MiB (a plan step's output files travel in one)."""

Data = TypeVar("Data", bound=str | bytes | memoryview)
R = TypeVar("R")

_STRUCTURE = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
"""A JSON string (skipped whole, escapes and all) or one bracket."""


class TooComplex(msgspec.DecodeError):
    """Input refused before decoding: over its size, or nested deeper than its depth."""


def json_too_deep(data: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON in ``data`` nests arrays and objects deeper than ``limit`` (brackets in strings aside).

    Linear, and free for almost every input: a text with no more opening brackets than ``limit`` cannot be
    deeper, and is not scanned."""
    if isinstance(data, str):
        if data.count("[") + data.count("{") <= limit:
            return False
        data = data.encode("utf-8", "surrogatepass")  # UTF-8 never puts a bracket or quote inside a character
    elif data.count(b"[") + data.count(b"{") <= limit:
        return False
    depth = 0
    for match in _STRUCTURE.finditer(data):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif token in (b"]", b"}"):
            depth -= 1
    return False


def bounded(
    decode: Callable[[Data], R],
    data: Data,
    *,
    what: str,
    max_bytes: int = MAX_REPLY_BYTES,
    json: bool = True,
    max_depth: int = MAX_DEPTH,
) -> R:
    """``decode(data)``, or `TooComplex` naming ``what`` when ``data`` is over ``max_bytes``, (``json``)
    nested deeper than ``max_depth``, or deep enough to exhaust the interpreter's recursion."""
    if len(data) > max_bytes:
        raise TooComplex(f"{what} is {len(data):,} long, over the limit of {max_bytes:,}")
    if json and isinstance(data, str | bytes) and json_too_deep(data, max_depth):
        raise TooComplex(f"{what} is nested deeper than {max_depth} levels")
    try:
        return decode(data)
    except RecursionError:
        raise TooComplex(f"{what} is nested deeper than the decoder's stack") from None
