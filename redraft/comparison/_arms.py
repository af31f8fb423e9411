"""The arms of a comparison: named variants of one experiment, from the command line or a TOML file.

An arm changes what decides results (`redraft.config.Experiment`): a strategy,
K, rounds, a model per role, ``patch``, a prompts file. Everything else (the
scenario or task file, budgets, runtime) is the comparison's, shared by every
arm, so the arms run the same tasks under the same limits.

A TOML file names each arm in a table::

    [arms.adversarial]
    strategy = "adversarial"

    [arms.debate-4o]
    strategy = "debate"
    critic = "openai:gpt-4o-mini"
    samples = 2

    [arms.terse]
    strategy = "adversarial"
    prompts = "terse.toml"   # entries of prompts.toml overridden (relative to this file)

    [baseline]
    samples = 16        # the sampling baseline's N (see `redraft.comparison._runner`)

Every fault is found before anything runs and named by file, arm and field.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from redraft.config import Experiment, check_bounds
from redraft.engine.prompt_files import load_prompts
from redraft.errors import UserError, unknown_name

SHARED = frozenset({"scenario", "tasks", "columns", "repeat"})
"""Experiment fields an arm may not change: the comparison's tasks (and how its task file is read), and its
repeats."""
ARM_FIELDS = frozenset(Experiment.__struct_fields__) - SHARED
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class Arm(msgspec.Struct, frozen=True, kw_only=True):
    """One variant: a name (its run directory's) and the experiment settings it changes."""

    name: str
    settings: dict[str, Any]


def arms_from_names(names: str) -> list[Arm]:
    """``adversarial,self_refine``: one arm per strategy, named after it."""
    arms = [Arm(name=n.strip(), settings={"strategy": n.strip()}) for n in names.split(",") if n.strip()]
    if not arms:
        raise UserError("--arms needs at least one strategy, e.g. --arms adversarial,self_refine")
    _check_names("--arms", [a.name for a in arms])
    return arms


def arms_from_file(path: Path) -> tuple[list[Arm], dict[str, Any]]:
    """The arms of a TOML file, and its ``[baseline]`` table; `UserError` naming file, arm and field."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"arms file not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"arms file {path}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"arms", "baseline"})
    if unknown:
        raise UserError(f"arms file {path}: {unknown_name('table', unknown[0], ['arms', 'baseline'])}")
    tables = data.get("arms")
    if not isinstance(tables, dict) or not tables:
        raise UserError(f"arms file {path}: no arms; add tables like [arms.adversarial] with a strategy")
    _check_names(f"arms file {path}", list(tables))
    arms = [_arm(path, name, table) for name, table in tables.items()]
    baseline = data.get("baseline", {})
    if not isinstance(baseline, dict) or set(baseline) - {"samples"}:
        raise UserError(f"arms file {path}: [baseline] takes only 'samples' (the sampling baseline's N)")
    return arms, baseline


def _arm(path: Path, name: str, table: Any) -> Arm:
    where = f"arms file {path}, arm {name!r}"
    if not isinstance(table, dict):
        raise UserError(f"{where}: expected a table of settings, got {type(table).__name__}")
    for field in table:
        if field in SHARED:
            raise UserError(f"{where}: {field!r} is the comparison's, shared by every arm; set it on the command line")
        if field not in ARM_FIELDS:
            raise UserError(f"{where}: {unknown_name('field', field, sorted(ARM_FIELDS))}")
    if "strategy" not in table:
        raise UserError(f"{where}: missing field 'strategy'")
    settings = dict(table)
    if isinstance(settings.get("prompts"), str):
        settings["prompts"] = _prompts_file(path, where, settings["prompts"])
    arm = Arm(name=name, settings=settings)
    validate_arm(arm, where)
    return arm


def _prompts_file(arms_file: Path, where: str, given: str) -> str:
    """An arm's prompts file, relative to the arms file, checked entry by entry (`redraft.engine.prompt_files`)."""
    resolved = str(arms_file.parent / given)
    try:
        load_prompts(resolved)
    except UserError as exc:
        raise UserError(f"{where}: field 'prompts': {exc}") from None
    return resolved


def validate_arm(arm: Arm, where: str) -> None:
    """The arm's settings as an `Experiment`: right types and in range; `UserError` prefixed with ``where``."""
    try:
        check_bounds(Experiment(**arm.settings))  # the ranges first: their messages name the range
        msgspec.convert(arm.settings, Experiment)  # then the types
    except msgspec.ValidationError as exc:
        field = str(exc).rsplit("`$.", 1)[-1].rstrip("`")
        raise UserError(f"{where}: field {field!r}: {str(exc).split(' - at ')[0]}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None


def _check_names(where: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if not _NAME.match(name):
            raise UserError(f"{where}: arm name {name!r} must be letters, digits, '_', '-' or '.' (it names a folder)")
        if name in seen:
            raise UserError(f"{where}: arm {name!r} is named twice")
        seen.add(name)
