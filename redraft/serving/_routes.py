"""What a request's ``model`` names: a strategy, and the model behind it.

``redraft/STRATEGY`` plays the strategy with the server's models; ``redraft/STRATEGY/MODEL`` with MODEL (a
backend spec) for every model role; an alias the server was started with (``--alias NAME=redraft/...``) stands
for one of those. A request may name a model of the providers' APIs (``openai:``, ``anthropic:``, ``azure:``, on
the server's own keys, by its name alone) or one the server itself was started with, never any other: a spec
string can name a file to load (``local:``), a module to import (``scripted:``) or a URL to call
(``openai-compatible:``, ``azure:...@URL``), which is the operator's choice, not a client's
(`redraft.serving._requested`).
"""

from __future__ import annotations

from dataclasses import dataclass

from redraft.errors import did_you_mean
from redraft.serving._openai import APIError
from redraft.serving._requested import named_model
from redraft.strategies import strategy_names

PREFIX = "redraft/"


@dataclass(frozen=True)
class Route:
    """A request's strategy and model (None: the server's own models)."""

    strategy: str
    model: str | None = None


def route(name: str, aliases: dict[str, str], own_models: frozenset[str]) -> Route:
    """The route ``name`` names; `APIError` 404 for a name nothing serves, 400 for a model a request may not name."""
    target = aliases.get(name, name)
    if not target.startswith(PREFIX):
        served = [f"{PREFIX}STRATEGY", f"{PREFIX}STRATEGY/MODEL", *sorted(aliases)]
        raise APIError(
            404,
            f"the model {name!r} does not exist (served: {', '.join(served)})",
            "not_found_error",
            param="model",
            code="model_not_found",
        )
    strategy, _, model = target[len(PREFIX) :].partition("/")
    known = strategy_names()
    if strategy not in known:
        near = did_you_mean(strategy, known)
        raise APIError(
            404,
            f"unknown strategy {strategy!r} in model {name!r} ({near}known: {', '.join(known)})",
            "not_found_error",
            param="model",
            code="model_not_found",
        )
    return Route(strategy, named_model(model, own_models, "model") if model else None)


def served_names(aliases: dict[str, str]) -> list[str]:
    """What ``GET /v1/models`` lists: every strategy on the server's models, then the aliases."""
    return [f"{PREFIX}{name}" for name in strategy_names()] + sorted(aliases)
