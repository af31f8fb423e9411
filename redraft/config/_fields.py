"""The settings' metadata as the command line and the checks read it: each field's flag, help, type and bounds,
and the aliases some fields have, each read once (evaluating a group's annotations compiles every one)."""

from __future__ import annotations

import functools
import math
import typing
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from redraft.config._settings import GROUPS
from redraft.errors import UserError


def flag(name: str) -> str:
    """The command-line flag of a setting."""
    return "--" + name.replace("_", "-")


def check_bounds(group: msgspec.Struct) -> None:
    """Each field of ``group`` against its ``Meta`` bounds (finite, in range); `UserError` naming the flag."""
    for name, hint in _hints(type(group)).items():
        value = getattr(group, name)
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        low, high = _bounds(hint)
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"{flag(name)} must be a finite number, got {value}")
        too_low = low is not None and (value < low[0] or (low[1] and value == low[0]))
        too_high = high is not None and value > high
        if too_low or too_high:
            raise UserError(f"{flag(name)} must be {_range(low, high)}, got {_number(value)}")


def _bounds(hint: Any) -> tuple[tuple[float, bool] | None, float | None]:
    """(lower bound, whether it is exclusive) and the upper bound of an annotated number type."""
    low: tuple[float, bool] | None = None
    high: float | None = None
    for meta in _metas(hint):
        if meta.ge is not None:
            low = (meta.ge, False)
        if meta.gt is not None:
            low = (meta.gt, True)
        if meta.le is not None:
            high = meta.le
    return low, high


def _metas(hint: Any) -> list[Meta]:
    """Every `Meta` in an annotation, through ``Annotated`` and ``X | None``."""
    found: list[Meta] = []
    if typing.get_origin(hint) is Annotated:
        base, *extras = typing.get_args(hint)
        found += [m for m in extras if isinstance(m, Meta)]
        found += _metas(base)
    else:
        for arg in typing.get_args(hint):
            found += _metas(arg)
    return found


def _range(low: tuple[float, bool] | None, high: float | None) -> str:
    if low is not None and high is None:
        return f"more than {_number(low[0])}" if low[1] else f"at least {_number(low[0])}"
    if low is None:
        return f"at most {_number(high or 0)}"
    opening = "(" if low[1] else "["
    return f"in {opening}{_number(low[0])}, {_number(high or 0)}]"


def _number(value: float) -> str:
    """``1,000,000`` for whole numbers, ``0.5`` otherwise."""
    return f"{int(value):,}" if float(value).is_integer() and abs(value) < 1e30 else f"{value:g}"


def description(group: type[msgspec.Struct], name: str) -> Meta:
    """The merged help and extras of one field (for the command line)."""
    hint = _hints(group)[name]
    text, extra = "", {}
    for meta in _metas(hint):
        text = meta.description or text
        extra.update(meta.extra or {})
    return Meta(description=text, extra=extra)


@functools.cache
def _hints(group: type[msgspec.Struct]) -> Mapping[str, Any]:
    """A group's field types with their metadata, evaluated once (each evaluation compiles every annotation)."""
    return typing.get_type_hints(group, include_extras=True)


@functools.cache
def field_types(group: type[msgspec.Struct]) -> Mapping[str, Any]:
    """A group's field types, their metadata stripped (what the command line's options are typed as)."""
    return typing.get_type_hints(group)


@functools.cache
def setting_aliases() -> Mapping[str, str]:
    """Other names of settings, each to its field's (``max_in_flight`` -> ``max_tasks_in_flight``).

    A field's ``aliases`` are flags (``--max-in-flight``); the name is the flag's, as a field's is.
    """
    return {
        alias.removeprefix("--").replace("-", "_"): name
        for group in GROUPS.values()
        for name in group.__struct_fields__
        for alias in (description(group, name).extra or {}).get("aliases", [])
    }
