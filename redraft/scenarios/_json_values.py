"""The values a task may carry, and the one strict JSON reader every task file format shares.

A task travels as a MessagePack frame in every request of its loop, so what it may hold is what a frame
can carry and JSON can say: text, integers of 64 bits, finite numbers, booleans, null, lists and objects
keyed by text, nested at most `MAX_DEPTH` levels, each string at most `MAX_STRING_CHARS` characters of
UTF-8. `value_fault` says where (a path such as ``reference.tests[3]``) and what breaks that in a value,
whichever reader made it: a JSON line, a CSV cell read as JSON, or a Parquet cell that arrived typed.

`decode_json` reads JSON text by these rules, where Python's reader is looser: it refuses a key seen
twice in one object (Python keeps the last silently), ``NaN`` and ``Infinity`` (Python accepts them),
an integer literal past 64 bits (Python converts up to 4,300 digits, slowly) and a number that
overflows to infinity (``1e400``). `converted` reads a cell as the kind ``--columns`` gives it, and
`checked_record` checks a record (a line's object, a row's fields) as a task's: its fields and their values.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any, Literal, get_args

from redraft.errors import UserError, did_you_mean

WHOLE = ("reference", "feedback")
"""Fields that hold an object: mapped whole, or key by key (``reference.KEY``)."""
FIELDS = ("id", "prompt", *WHOLE)
"""A task record's fields (a JSON line's keys, the fields a table's columns map to)."""
Kind = Literal["str", "int", "float", "json"]
"""How a task file's cell is read (``--columns FIELD=COLUMN:KIND``)."""
KINDS: tuple[Kind, ...] = get_args(Kind)
MAX_STRING_CHARS = 1024 * 1024
MAX_ID_CHARS = 256
"""Ids name rows of every table, trace files and `redraft trace` arguments."""
MAX_DEPTH = 32
MIN_INT, MAX_INT = -(2**63), 2**64 - 1
"""The integers a MessagePack frame can carry."""

_INT_RANGE = f"integers must be in [{MIN_INT:,}, {MAX_INT:,}] (64 bits): write a larger one as a string"
_JSON_TYPES = (str, int, float, bool, type(None), dict, list)


class _BigInt:
    """An integer literal too long to convert (Python refuses past 4,300 digits): refused by `value_fault`."""

    def __init__(self, digits: str) -> None:
        self.digits = len(digits.lstrip("-"))


class _NonFinite:
    """``NaN``, ``Infinity`` or ``-Infinity``: Python's JSON reader accepts them; `value_fault` refuses them."""

    def __init__(self, name: str) -> None:
        self.name = name


class _DuplicateKey(Exception):
    """A key seen twice in one object (Python's reader would keep the last silently)."""


def _read_int(digits: str) -> int | _BigInt:
    return _BigInt(digits) if len(digits.lstrip("-")) > 20 else int(digits)


def _read_float(literal: str) -> float | _NonFinite:
    value = float(literal)
    return value if math.isfinite(value) else _NonFinite(literal)  # 1e400 would be read as inf


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record = dict(pairs)
    if len(record) < len(pairs):
        raise _DuplicateKey(next(k for k, n in Counter(k for k, _ in pairs).items() if n > 1))
    return record


def decode_json(where: str, text: str) -> Any:
    """``text`` as a JSON value read by the module's rules; `UserError` starting with ``where`` on bad JSON.

    Values past a limit are returned as markers that `value_fault` names: check the result with it.
    """
    try:
        return json.loads(
            text, parse_int=_read_int, parse_float=_read_float, parse_constant=_NonFinite, object_pairs_hook=_object
        )
    except _DuplicateKey as exc:
        raise UserError(f"{where}: the key {quoted(exc.args[0])} appears twice in one object") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:  # Python's reader gave up near 1,000 levels: far past the limit
        raise UserError(f"{where}: nested deeper than {MAX_DEPTH} levels, the limit") from None


def checked_record(where: str, record: dict[str, Any]) -> dict[str, Any]:
    """One record (a line's object, a row's fields) checked as a task's; `UserError` starting with ``where`` on
    its first fault."""
    unknown = sorted(set(record) - set(FIELDS))
    if unknown:
        near = did_you_mean(unknown[0], FIELDS) if isinstance(unknown[0], str) else ""
        raise UserError(f"{where}: unknown field {quoted(unknown[0])} ({near}allowed: {', '.join(FIELDS)})")
    for field in ("id", "prompt"):
        if field not in record:
            raise UserError(f"{where}: missing field {field!r}")
        if not isinstance(record[field], str):
            raise UserError(f"{where}: {field!r} must be a string, got {json_type(record[field])}")
        if not record[field].strip():
            raise UserError(f"{where}: {field!r} is empty")
    for field in ("reference", "feedback"):
        if not isinstance(record.get(field, {}), dict):
            raise UserError(f"{where}: {field!r} must be an object, got {json_type(record[field])}")
    if problem := string_fault(record["id"], MAX_ID_CHARS, "an id"):
        raise UserError(f"{where}: id: {problem}")
    if fault := value_fault(record, "", 1):
        raise UserError(f"{where}: {shown(fault[0])}: {fault[1]}")
    return record


def value_fault(value: Any, path: str, depth: int) -> tuple[str, str] | None:
    """Where (a path such as ``reference.tests[3]``) and what breaks a limit in ``value``, ``depth`` levels
    down; None when nothing does."""
    if isinstance(value, _BigInt):
        return path, f"an integer of {value.digits:,} digits; {_INT_RANGE}"
    if isinstance(value, _NonFinite):
        return path, f"{value.name} is not a finite number (JSON has no NaN or Infinity)"
    if not isinstance(value, _JSON_TYPES):  # a typed cell (a Parquet timestamp, bytes, a decimal)
        return path, f"a value of type {type(value).__name__}, which JSON has not: store it as text"
    if isinstance(value, float) and not math.isfinite(value):
        return path, f"{value} is not a finite number (JSON has no NaN or Infinity)"
    if isinstance(value, int) and not isinstance(value, bool) and not MIN_INT <= value <= MAX_INT:
        return path, f"{value} does not fit in 64 bits; {_INT_RANGE}"
    if isinstance(value, str):
        problem = string_fault(value)
        return (path, problem) if problem else None
    if not isinstance(value, dict | list):
        return None
    if depth > MAX_DEPTH:
        return path, f"nested deeper than {MAX_DEPTH} levels, the limit"
    if isinstance(value, list):
        items = [(f"{path}[{i}]", item) for i, item in enumerate(value)]
    else:
        if any(not isinstance(key, str) for key in value):
            return f"{path or 'the line'}, a key", "an object's keys must be text"
        if problem := next(filter(None, map(string_fault, value)), None):
            return f"{path or 'the line'}, a key", problem
        items = [(_child(path, key), item) for key, item in value.items()]
    return next(filter(None, (value_fault(item, where, depth + 1) for where, item in items)), None)


def _child(path: str, key: str) -> str:
    name = key if key.isidentifier() and len(key) <= 40 else f"[{quoted(key, 20)}]"
    return f"{path}{name}" if name.startswith("[") else f"{path}.{name}" if path else name


def string_fault(text: str, limit: int = MAX_STRING_CHARS, what: str = "a string") -> str | None:
    """What is wrong with ``text`` as a task's string (too long, a lone surrogate), or None."""
    if len(text) > limit:
        return f"{len(text):,} characters; {what} may hold at most {limit:,}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds a lone surrogate {text[exc.start]!r} at character {exc.start}, which is not UTF-8 text"
    return None


def shown(path: str) -> str:
    """A path cut for a one-line message: its start and its end."""
    return path if len(path) <= 80 else f"{path[:40]}...{path[-37:]}"


def quoted(text: str, limit: int = 40) -> str:
    """``text`` quoted for a one-line message, cut at ``limit`` characters."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def json_type(value: Any) -> str:
    """What ``value`` is, in JSON's words (``an object``, ``a number``...)."""
    kinds = ((dict, "an object"), (list, "an array"), (str, "a string"), (bool, "a boolean"), (type(None), "null"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "a number")


def converted(at: str, value: Any, kind: Kind) -> Any:
    """A cell read as ``kind``: text is parsed; a typed cell must already be of the kind (an int is a float)."""
    if kind == "json":
        return decode_json(at, value) if isinstance(value, str) else value
    if isinstance(value, bool):
        raise UserError(f"{at}: a boolean is not {_KIND_WORDS[kind]}")
    if kind == "str" and isinstance(value, int | str):
        return str(value)
    if kind == "int" and isinstance(value, int):
        return value
    if kind == "float" and isinstance(value, int | float):
        return float(value)
    if kind == "int" and isinstance(value, str) and _INTEGER.fullmatch(value):
        return int(value)
    if kind == "float" and isinstance(value, str):
        try:
            return float(value)  # "nan" and "inf" parse: `value_fault` refuses them
        except ValueError:
            pass
    shown_value = quoted(value, 20) if isinstance(value, str) else json_type(value)
    raise UserError(f"{at}: {shown_value} is not {_KIND_WORDS[kind]}")


_KIND_WORDS = {"str": "text", "int": "an integer", "float": "a number"}
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")
