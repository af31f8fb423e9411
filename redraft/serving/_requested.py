"""What a request may name: a model the operator allowed, and nothing that steers the server's keys or money.

The server calls the providers on the operator's keys, so a model a request names (its ``model``'s
``redraft/STRATEGY/MODEL``, or a role of its ``redraft`` object such as ``critic``) is held to three rules:

- it is a model the server was started with (any spec the operator wrote, endpoint and all), or a bare
  ``openai:MODEL``, ``anthropic:MODEL`` or ``azure:DEPLOYMENT``: no ``@URL`` (where the key would be sent), no
  ``?`` query (the endpoint's cluster-wide limits), nothing but a model's name;
- the endpoint it is then called at comes from the server's own configuration and is https, so the key never
  crosses the network in clear;
- with a money budget (``--usd-per-day``), the price table prices it: an unpriced model would cost nothing
  against the budget, which would then bound nothing.

Each refusal is an `APIError` 400 raised before any call is made. The server's own models, under a money budget,
must have a price too (`check_own_priced`): a `UserError` as it starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from redraft.engine.resolution import ResolvedRun
from redraft.errors import UserError
from redraft.serving._openai import APIError

REQUEST_PROVIDERS = ("openai:", "anthropic:", "azure:")
"""The backends a request may name a model of (on the server's keys)."""
_BARE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")
"""A model's or deployment's name, and nothing else: no ``@`` (an endpoint), no ``?`` (limits), no spaces."""


def named_model(model: str, own_models: frozenset[str], param: str) -> str:
    """``model`` when a request may name it (see the module docstring); `APIError` 400 otherwise."""
    if model in own_models:
        return model
    provider = next((p for p in REQUEST_PROVIDERS if model.startswith(p)), None)
    if provider is None:
        raise APIError(
            400,
            f"{param}: a request may name a model of {', '.join(p + 'MODEL' for p in REQUEST_PROVIDERS)} or one "
            f"the server was started with, not {model[:200]!r}",
            param=param,
        )
    if not _BARE_NAME.fullmatch(model[len(provider) :]):
        raise APIError(
            400,
            f"{param}: a request names a model by its name alone ({provider}MODEL): where the server's keys go "
            "(an @URL) and its limits (a ?query) are the server's configuration, not a request's",
            param=param,
            code="model_not_allowed",
        )
    return model


def check_named(run: ResolvedRun, named: Mapping[str, str], own_models: frozenset[str], money: bool) -> None:
    """`APIError` 400 for a role's model that ``named`` says the request chose (role -> spec) and that would be
    called at a plain-http endpoint, or that the price table cannot price while the server's budget is in
    money (``money``). The server's own models are the operator's choice and pass."""
    for role, spec in named.items():
        if spec in own_models:
            continue
        backend = getattr(run.setup, role)
        endpoint = endpoint_of(backend)
        param = "model" if role == "drafter" else f"redraft.{role}"
        if endpoint is not None and urlsplit(endpoint).scheme != "https":
            raise APIError(
                400,
                f"{param}: the server reaches {spec} at an endpoint that is not https, and sends its key there only "
                "for the models it was started with",
                param=param,
                code="model_not_allowed",
            )
        model = str(getattr(backend, "model", backend.spec))
        if money and not run.settings.prices.known(model):
            raise APIError(
                400,
                f"{param}: this server's budget is in money and its price table has no price for {model}, so its "
                "calls could not be counted against it: name a priced model",
                param=param,
                code="model_not_priced",
            )


def check_own_priced(run: ResolvedRun) -> None:
    """`UserError` for a model the server was started with that the price table cannot price, when the server's
    budget is in money (``--usd-per-day``): its calls would cost nothing against it."""
    for role in ("drafter", "critic", "verifier", "escalate"):
        backend = getattr(run.setup, role)
        model = None if backend is None else str(getattr(backend, "model", backend.spec))
        if model is not None and not run.settings.prices.known(model):
            raise UserError(
                f"--usd-per-day spends what the price table says each call costs, and the {role}'s model {model} "
                "has no price there: add it with --prices FILE"
            )


def endpoint_of(backend: Any) -> str | None:
    """The URL a backend spec's calls go to, when its spec says one (None: the provider's own default)."""
    inner = getattr(backend, "inner", backend)  # a spec behind its endpoint's limiter
    azure = getattr(inner, "azure", None)
    if azure is not None:
        return str(azure.endpoint)
    base_url = getattr(inner, "base_url", None)
    return None if base_url is None else str(base_url)
