"""A rubric said other ways, for the card's rubric stability: the same criteria and levels (names, weights, scores,
threshold), only their descriptions in other words, or their order changed.

Three sources, each a `Rewording`: the layout (`redraft.judging.rubric.reworded`: criteria, then levels, in
reverse order), always; the user's (``--rewordings FILE``, `load_rewordings`), which keep priority: given them,
no model is asked; or else a model's (`model_rewordings`: the judge's own model by default, ``--reword-model``),
each asked once with its own seed through the response cache, so a card measured again asks nothing it asked
before. A model's reply that is not a wording of every criterion and level of the rubric, under its names, is
left out, and said. Every rewording a card used is on its page and saved beside it (`rewordings_json`, in the
``--rewordings`` format, so it can be edited and given back).

A wording file is JSON or TOML: ``rewordings``, a list of wordings, each ``criteria`` = a list of ``name``,
``description`` and ``levels`` (each ``name`` and ``description``), naming every criterion and level of the
rubric and nothing else. A file that is not one is a `UserError` of one line naming it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import tomllib
from pathlib import Path
from typing import Any, Literal

import msgspec

from redraft.backends import BackendSpec, ChatRequest, resolve
from redraft.backends.cache import cached
from redraft.engine import run_blocking
from redraft.engine.prompts import Prompts, templates_of
from redraft.errors import UserError, describe
from redraft.judging._answers import decoded
from redraft.judging.judge import rubric_text
from redraft.judging.rubric import Name, Rubric, Text, reworded
from redraft.protocols.messages import ChatMessage

REWORDINGS = 2
"""Rewordings a model is asked for, by default."""
REWORDING_TEMPERATURE = 0.7
"""Another wording each seed: a reworded rubric, not the same words again."""
REWORDINGS_FILE = "judge-rewordings.json"


class LevelWords(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Name
    description: Text


class CriterionWords(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Name
    description: Text
    levels: list[LevelWords]


class Wording(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A rubric's descriptions, said one way (its names as the rubric gives them)."""

    criteria: list[CriterionWords]


class _File(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    rewordings: list[Wording]


class Rewording(msgspec.Struct, frozen=True, kw_only=True):
    """A rubric reworded, and by whom: its layout changed, the user's words, or a model's."""

    source: Literal["layout", "user", "model"]
    by: str
    """How (``criteria reversed``), whose file, or which model (its backend spec)."""
    rubric: Rubric


_WORDING = msgspec.json.Decoder(Wording)


@functools.cache
def rewording_prompts() -> Prompts:
    """The rewording model's templates (``judging/rewording.toml``)."""
    return templates_of("redraft.judging", "rewording.toml")


def layout_rewordings(rubric: Rubric) -> list[Rewording]:
    """The rubric with its criteria, then its levels, in reverse order (`reworded`)."""
    how = ("criteria reversed", "levels reversed")
    return [Rewording(source="layout", by=by, rubric=r) for by, r in zip(how, reworded(rubric), strict=True)]


def worded(rubric: Rubric, wording: Wording) -> Rubric:
    """``rubric`` with ``wording``'s descriptions; `ValueError` unless it words every criterion and level of the
    rubric, under their names, and nothing else."""
    given = {c.name: c for c in wording.criteria}
    if sorted(given) != sorted(c.name for c in rubric.criteria) or len(given) != len(wording.criteria):
        raise ValueError(f"it words the criteria {sorted(given)}, not the rubric's {[c.name for c in rubric.criteria]}")
    criteria = []
    for criterion in rubric.criteria:
        words = given[criterion.name]
        levels = {level.name: level.description for level in words.levels}
        if sorted(levels) != sorted(level.name for level in criterion.levels) or len(levels) != len(words.levels):
            raise ValueError(f"criterion {criterion.name!r}: it words the levels {sorted(levels)}")
        criteria.append(
            msgspec.structs.replace(
                criterion,
                description=words.description,
                levels=[msgspec.structs.replace(lv, description=levels[lv.name]) for lv in criterion.levels],
            )
        )
    return msgspec.structs.replace(rubric, criteria=criteria)


def load_rewordings(path: Path, rubric: Rubric) -> list[Rewording]:
    """The user's rewordings of ``rubric`` in ``path`` (see the module docstring); a `UserError` of one line."""
    try:
        raw = path.read_text(encoding="utf-8")
        data = json.loads(raw) if path.suffix == ".json" else tomllib.loads(raw)
        wordings = msgspec.convert(data, _File).rewordings
    except OSError as exc:
        raise UserError(f"cannot read rewordings {path}: {exc.strerror or exc}") from None
    except (ValueError, tomllib.TOMLDecodeError, msgspec.ValidationError) as exc:
        raise UserError(f"{path} is not a file of rewordings: {exc}") from None
    if not wordings:
        raise UserError(f"{path} holds no rewording")
    made = []
    for number, wording in enumerate(wordings, start=1):
        try:
            made.append(Rewording(source="user", by=f"{path.name} #{number}", rubric=worded(rubric, wording)))
        except ValueError as exc:
            raise UserError(f"{path}: rewording {number} is not one of rubric {rubric.name!r}: {exc}") from None
    return made


async def model_rewordings(
    rubric: Rubric, backend: BackendSpec, count: int = REWORDINGS, *, cache: bool = True
) -> tuple[list[Rewording], list[str]]:
    """``count`` rewordings of ``rubric`` written by ``backend``'s model, each its own call (seed 0, 1, ...), and
    why each reply that is not one was left out."""
    client = cached(backend.create(), backend.spec, enabled=cache)
    templates = rewording_prompts()
    schema = wording_schema(rubric)

    async def one(seed: int) -> Rewording | str:
        user = templates.render("reword_user", rubric=rubric_text(rubric), number=seed + 1)
        request = ChatRequest(
            messages=[
                ChatMessage(role="system", content=templates.render("reword_system")),
                ChatMessage(role="user", content=user),
            ],
            max_tokens=200 + 120 * sum(1 + len(c.levels) for c in rubric.criteria),
            temperature=REWORDING_TEMPERATURE,
            seed=seed,
            json_schema=schema,
        )
        try:
            text = (await client.complete(request)).text
            wording = decoded(_WORDING, text, "a rewording")
            return Rewording(source="model", by=backend.spec, rubric=worded(rubric, wording))
        except Exception as exc:  # no answer, or not a rewording: the card goes on without it, and says so
            return f"rewording {seed + 1} by {backend.spec} left out: {describe(exc)[:200]}"

    made = await asyncio.gather(*(one(seed) for seed in range(count)))
    return [m for m in made if isinstance(m, Rewording)], [m for m in made if isinstance(m, str)]


def wording_schema(rubric: Rubric) -> dict[str, Any]:
    """The JSON Schema of a rewording of ``rubric``, titled ``rewording``, inline (a grammar for the embedded model
    needs no references): its criterion and level names are enums, so the model cannot rename them."""
    words = {"type": "string", "maxLength": 1_000}
    level_names = sorted({lv.name for c in rubric.criteria for lv in c.levels})
    level = {
        "type": "object",
        "properties": {"name": {"enum": level_names}, "description": words},
        "required": ["name", "description"],
    }
    criterion = {
        "type": "object",
        "properties": {
            "name": {"enum": [c.name for c in rubric.criteria]},
            "description": words,
            "levels": {"type": "array", "items": level, "maxItems": max(len(c.levels) for c in rubric.criteria)},
        },
        "required": ["name", "description", "levels"],
    }
    count = len(rubric.criteria)
    criteria = {"type": "array", "items": criterion, "minItems": count, "maxItems": count}
    return {"title": "rewording", "type": "object", "properties": {"criteria": criteria}, "required": ["criteria"]}


def rewordings_by(spec: str, rubric: Rubric, count: int = REWORDINGS) -> tuple[list[Rewording], list[str]]:
    """`model_rewordings` by the model the backend ``spec`` names, from synchronous code (`UserError` for a spec
    that is not one)."""
    return run_blocking(model_rewordings(rubric, resolve(spec), count))


def rewordings_json(rewordings: list[Rewording]) -> bytes:
    """The user's and a model's rewordings in the ``--rewordings`` file format (the layout's are not words)."""
    wordings: list[dict[str, Any]] = [
        {
            "criteria": [
                {
                    "name": c.name,
                    "description": c.description,
                    "levels": [{"name": lv.name, "description": lv.description} for lv in c.levels],
                }
                for c in r.rubric.criteria
            ]
        }
        for r in rewordings
        if r.source != "layout"
    ]
    return json.dumps({"rewordings": wordings}, indent=2, ensure_ascii=False).encode() + b"\n"
