"""A rubric: named criteria, each with a weight and described levels, and the threshold a grade passes at.

A rubric is a TOML or JSON file::

    threshold = 0.7               # a grade passes at this weighted score or above
    [[criteria]]
    name = "faithful"
    weight = 2                    # default 1
    description = "Every fact in the summary is in the source."
    [[criteria.levels]]
    name = "yes"
    score = 1.0                   # in [0, 1]
    description = "No fact is missing from the source or contradicts it."
    [[criteria.levels]]
    name = "no"
    score = 0.0
    description = "At least one fact is invented or wrong."

A scenario may carry its own (`Scenario.rubric`, found by `scenario_rubric`), the default of a judge that grades
its answers. It is validated once, where it is read (`load_rubric`): every mistake is one line naming the file and the
place, a `UserError`. A grade by a rubric is the weighted mean of the chosen levels' scores (`Rubric.score`).
`reworded` gives the same rubric said another way (criteria and levels in another order), which must not
change a fair judge's verdicts: the calibration's rubric stability.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import msgspec

from redraft.errors import UserError
from redraft.scenarios import Scenario

MAX_CRITERIA = 8
"""Criteria in one rubric at most (a judge's answer names one level per criterion)."""
MAX_LEVELS = 6
"""Levels of one criterion at most."""
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$")]
Text = Annotated[str, msgspec.Meta(max_length=1_000)]


class Level(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One described level of a criterion, and what it scores."""

    name: Name
    score: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    description: Text


class Criterion(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One thing the judge grades, at one of its levels."""

    name: Name
    description: Text
    levels: Annotated[list[Level], msgspec.Meta(min_length=2, max_length=MAX_LEVELS)]
    weight: Annotated[float, msgspec.Meta(gt=0.0)] = 1.0

    def level(self, name: str) -> Level | None:
        return next((level for level in self.levels if level.name == name), None)


class Rubric(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Criteria with described levels, and the weighted score a grade passes at."""

    criteria: Annotated[list[Criterion], msgspec.Meta(min_length=1, max_length=MAX_CRITERIA)]
    threshold: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] = 0.7
    name: str = "rubric"
    """What the rubric is called in a card or a grade (its file's stem, when read from one)."""

    def score(self, levels: Mapping[str, str]) -> float:
        """The weighted mean score of the level chosen for each criterion (``levels``: criterion -> level name;
        every criterion must have a known level: a `KeyError` otherwise)."""
        total = sum(c.weight for c in self.criteria)
        return sum(c.weight * _level(c, levels[c.name]).score for c in self.criteria) / total

    def score_of(self, criterion: Criterion, level: str) -> float:
        """What ``level`` of ``criterion`` scores (a `KeyError` for a level it does not have)."""
        return _level(criterion, level).score

    def passes(self, score: float) -> bool:
        return score >= self.threshold - 1e-12  # a weighted mean that should equal the threshold still passes


def _level(criterion: Criterion, name: str) -> Level:
    level = criterion.level(name)
    if level is None:
        raise KeyError(f"criterion {criterion.name!r} has no level {name!r}")
    return level


def load_rubric(path: str | Path) -> Rubric:
    """The rubric in ``path`` (``.toml`` or ``.json``), validated; a `UserError` of one line if it is not one."""
    return read_rubric(path)[0]


def read_rubric(path: str | Path) -> tuple[Rubric, str]:
    """The rubric in ``path``, as `load_rubric` reads it, and the SHA-256 of the file's bytes, from the same read."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read rubric {path}: {exc.strerror or exc}") from None
    return _parsed(path, data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")), hashlib.sha256(
        data
    ).hexdigest()


def _parsed(path: Path, raw: str) -> Rubric:
    try:
        data = json.loads(raw) if path.suffix == ".json" else tomllib.loads(raw)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"rubric {path} is not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}") from None
    if isinstance(data, dict):
        data.setdefault("name", path.stem)
    return rubric_of(data, where=str(path))


def rubric_of(data: object, *, where: str = "rubric") -> Rubric:
    """``data`` (a rubric's table) validated as a `Rubric`; a `UserError` of one line if it is not one."""
    try:
        rubric = msgspec.convert(data, Rubric)
    except msgspec.ValidationError as exc:
        raise UserError(f"{where}: {exc}") from None
    names = [c.name for c in rubric.criteria]
    if len(set(names)) < len(names):
        raise UserError(f"{where}: two criteria share a name ({', '.join(names)})")
    for criterion in rubric.criteria:
        levels = [level.name for level in criterion.levels]
        if len(set(levels)) < len(levels):
            raise UserError(f"{where}: criterion {criterion.name!r} has two levels of one name")
    return rubric


def scenario_rubric(scenario: Scenario) -> Rubric | None:
    """``scenario``'s own rubric (`Scenario.rubric`), validated and named after it (unless it names itself);
    None when it has none. A scenario whose rubric is not one is a `UserError` of one line naming it."""
    table = scenario.rubric()
    if table is None:
        return None
    return rubric_of({"name": scenario.name, **table}, where=f"scenario {scenario.name!r}'s rubric")


def reworded(rubric: Rubric) -> list[Rubric]:
    """The same rubric said other ways: the criteria in reverse order, then each criterion's levels in reverse
    order. The same grades are due under each; a judge whose verdicts move with them reads the layout, not
    the answer."""
    criteria_reversed = msgspec.structs.replace(rubric, criteria=rubric.criteria[::-1])
    levels_reversed = msgspec.structs.replace(
        rubric, criteria=[msgspec.structs.replace(c, levels=c.levels[::-1]) for c in rubric.criteria]
    )
    return [criteria_reversed, levels_reversed]
