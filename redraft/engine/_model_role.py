"""What every role that calls a model shares: its backend client, behind the node's response cache, and its
sampling settings and prompt templates."""

from __future__ import annotations

from redraft.backends.base import Backend, BackendSpec
from redraft.backends.cache import cached
from redraft.engine.prompts import Prompts


class ModelRole:
    """A role with one backend client, made where the role lives (inside its actor, on a cluster)."""

    def __init__(
        self,
        backend: BackendSpec,
        *,
        temperature: float,
        max_tokens: int,
        cache: bool = True,
        prompts: Prompts | None = None,
    ) -> None:
        self._backend: Backend = cached(backend.create(), backend.spec, enabled=cache)
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._prompts = prompts
