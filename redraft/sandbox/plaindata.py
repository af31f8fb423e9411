"""Plain data over the harness's pipes: the only values a test process accepts from a candidate.

Standard library only, and importing it does nothing: the launcher loads it by path into the two
processes of a harnessed run (see harness.py), where redraft itself may not be importable.

Invariants:

- `from_tree` returns only values it built itself, of the exact builtin types None, bool, int,
  float, complex, str, bytes, and list, tuple, dict, set, frozenset of those, nested at most
  `MAX_DEPTH` deep, read from a frame of at most `MAX_FRAME_BYTES`. Anything else is `Malformed`.
  It never runs code the data names (no pickle, no eval, no class looked up by name), so a
  tampered sender can make it return a wrong value, never a lying object.
- `to_tree` takes only values of those exact types: a subclass of int, str or list is not plain
  data (its ``__eq__`` could lie), nor a generator, a function or any other object; it raises
  `NotPlain` naming the first such type it meets, or the depth or size it went past.
- A frame is a 4-byte big-endian length and that many bytes of JSON. `read_frame` never reads
  more than its limit and never waits past its deadline.

See docs/architecture.md, section "Plain data as JSON trees".
"""

from __future__ import annotations

import json
import os
import select
import time
import traceback
from typing import Any

MAX_DEPTH = 100
"""Deepest nesting of containers accepted (a value is depth 0)."""
MAX_FRAME_BYTES = 1 << 20
"""Largest frame accepted, and largest value sent: 1 MiB of JSON."""
MAX_TEXT = 1000
"""Longest text (a summary, a type's name) kept from the other side."""

PLAIN_TYPES = "None, bool, int, float, complex, str, bytes, and lists, tuples, dicts, sets of those"
"""Plain data, in words for a model."""

_SMALL_INT = 1 << 63
_CONTAINERS: dict[type, str] = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}
_BUILDERS: dict[str, Any] = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


class NotPlain(Exception):
    """A value that is not plain data; the message names its type (or the limit it broke)."""


class Malformed(Exception):
    """Bytes that are not a valid frame or tree."""


def type_name(value: object) -> str:
    """``value``'s type as ``module.QualName`` (``int`` for builtins), capped; never raises."""
    try:
        kind = type(value)
        module, name = str(kind.__module__), str(kind.__qualname__)
        return (name if module == "builtins" else f"{module}.{name}")[:MAX_TEXT]
    except Exception:
        return "an object whose type has no readable name"


def to_tree(value: object, depth: int = 0) -> Any:
    """``value`` as a JSON-ready tree; `NotPlain` for anything but plain data."""
    if depth > MAX_DEPTH:
        raise NotPlain(f"a value nested deeper than {MAX_DEPTH} levels")
    kind = type(value)
    if value is None or kind is bool or kind is str or kind is float:
        return value
    if kind is int:
        number: int = value  # type: ignore[assignment]
        return number if -_SMALL_INT < number < _SMALL_INT else ["int", hex(number)]
    if kind is complex:
        z: complex = value  # type: ignore[assignment]
        return ["complex", z.real, z.imag]
    if kind is bytes:
        return ["bytes", value.hex()]  # type: ignore[attr-defined]
    if kind in _CONTAINERS:
        return [_CONTAINERS[kind], [to_tree(item, depth + 1) for item in value]]  # type: ignore[attr-defined]
    if kind is dict:
        items = value.items()  # type: ignore[attr-defined]
        return ["dict", [[to_tree(k, depth + 1), to_tree(v, depth + 1)] for k, v in items]]
    raise NotPlain(f"an instance of {type_name(value)}, which is not plain data ({PLAIN_TYPES})")


def from_tree(node: Any, depth: int = 0) -> Any:
    """The value a tree describes, rebuilt from builtins only; `Malformed` for anything else."""
    if depth > MAX_DEPTH:
        raise Malformed(f"nested deeper than {MAX_DEPTH} levels")
    kind = type(node)
    if node is None or kind is bool or kind is str or kind is float or kind is int:
        return node
    if kind is not list or len(node) not in (2, 3) or type(node[0]) is not str:
        raise Malformed(f"not a tree node: {type_name(node)}")
    tag, *parts = node
    try:
        return _tagged(tag, parts, depth)
    except (TypeError, ValueError, OverflowError) as exc:  # unhashable keys, bad hex, ...
        raise Malformed(f"a bad {tag[:40]!r} node: {type(exc).__name__}") from exc


def _tagged(tag: str, parts: list[Any], depth: int) -> Any:
    if tag == "int" and len(parts) == 1 and type(parts[0]) is str:
        return int(parts[0], 16)
    if tag == "complex" and len(parts) == 2 and all(type(p) in (int, float) for p in parts):
        return complex(float(parts[0]), float(parts[1]))
    if tag == "bytes" and len(parts) == 1 and type(parts[0]) is str:
        return bytes.fromhex(parts[0])
    if tag in _BUILDERS and len(parts) == 1 and type(parts[0]) is list:
        return _BUILDERS[tag](from_tree(item, depth + 1) for item in parts[0])
    if tag == "dict" and len(parts) == 1 and type(parts[0]) is list:
        pairs = parts[0]
        if not all(type(pair) is list and len(pair) == 2 for pair in pairs):
            raise Malformed("a dict node whose items are not pairs")
        return {from_tree(k, depth + 1): from_tree(v, depth + 1) for k, v in pairs}
    raise Malformed(f"unknown tree node {tag[:40]!r}")


def dumps(message: Any) -> bytes:
    """A message (JSON-ready: lists, strings, trees) as a frame's payload; `NotPlain` past the size limit."""
    payload = json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    if len(payload) > MAX_FRAME_BYTES:
        raise NotPlain(f"a value of {len(payload)} bytes as plain data, over the {MAX_FRAME_BYTES}-byte limit")
    return payload


def loads(payload: bytes) -> Any:
    """A frame's payload as JSON (no trees rebuilt yet); `Malformed` if it is not JSON."""
    try:
        return json.loads(payload.decode("ascii"))
    except (ValueError, RecursionError) as exc:
        raise Malformed(f"not JSON: {type(exc).__name__}") from exc


def write_frame(fd: int, payload: bytes) -> None:
    """Write one frame (blocking); BrokenPipeError when the reader is gone."""
    data = memoryview(len(payload).to_bytes(4, "big") + payload)
    while data:
        data = data[os.write(fd, data) :]


def read_frame(fd: int, *, deadline: float | None = None, limit: int = MAX_FRAME_BYTES) -> bytes:
    """Read one frame: EOFError if the writer is gone, TimeoutError at ``deadline`` (a monotonic
    time), `Malformed` when it announces more than ``limit`` bytes (which are then not read)."""
    size = int.from_bytes(_read_exactly(fd, 4, deadline), "big")
    if size > limit:
        raise Malformed(f"a frame of {size} bytes, over the {limit}-byte limit")
    return _read_exactly(fd, size, deadline)


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytes:
    data = bytearray()
    while len(data) < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("no reply before the deadline")
        chunk = os.read(fd, min(size - len(data), 65536))
        if not chunk:
            raise EOFError("the other side closed its pipe")
        data += chunk
    return bytes(data)


# ---------------------------------------------------------------- exceptions, as text


def summarize(exc: BaseException, filename: str, lines: list[str]) -> str:
    """``ErrorType: message`` and the line of ``filename`` (whose text is ``lines``) it was raised at.

    The line is the last frame in ``filename`` (``in check: assert ...``, ``at top level: ...``),
    or a SyntaxError's own line; without one, the error alone. Never raises; capped at `MAX_TEXT`.
    """
    try:
        error = _error_line(exc)
        where, lineno = _last_frame(exc, filename)
        code = lines[lineno - 1].strip() if lineno is not None and 0 < lineno <= len(lines) else ""
        text = f"{error}\n  {where}: {code}" if code and code != error else error
    except Exception:
        text = f"{type_name(exc)} (its message could not be read)"
    return text[:MAX_TEXT]


def _error_line(exc: BaseException) -> str:
    lines = traceback.format_exception_only(type(exc), exc)
    return lines[-1].strip() if lines else type_name(exc)


def _last_frame(exc: BaseException, filename: str) -> tuple[str, int | None]:
    if isinstance(exc, SyntaxError) and exc.filename == filename:
        return "at", exc.lineno
    where, lineno = "at", None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            name = tb.tb_frame.f_code.co_name
            where, lineno = ("at top level" if name == "<module>" else f"in {name}"), tb.tb_lineno
        tb = tb.tb_next
    return where, lineno
