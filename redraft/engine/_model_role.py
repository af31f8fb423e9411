"""What every role that calls a model shares: its backend client, behind the node's response cache, and the
settings of its calls."""

from __future__ import annotations

from dataclasses import dataclass

from redraft.backends.base import Backend, BackendSpec
from redraft.backends.cache import cached
from redraft.engine.prompts import Prompts


@dataclass(frozen=True)
class CallSettings:
    """How a role calls its model (plain data, so it travels with the role's constructor)."""

    temperature: float
    max_tokens: int
    cache: bool = True
    """Answer repeated calls from the node's response cache (`redraft.backends.cache`)."""
    prompts: Prompts | None = None
    """The templates the role renders; None: the built-in ones."""
    payer: str = ""
    """Whose money the role's calls are: the run directory's id (`redraft.rundir.RunStore.payer`), recorded with
    each answer the response cache keeps, so a later hit knows whether this run or another paid for it."""


class ModelRole:
    """A role with one backend client, made where the role lives (inside its actor, on a cluster)."""

    def __init__(self, backend: BackendSpec, settings: CallSettings) -> None:
        self._backend: Backend = client(backend, settings)
        self._temperature = settings.temperature
        self._max_tokens = settings.max_tokens
        self._prompts = settings.prompts


def client(backend: BackendSpec, settings: CallSettings) -> Backend:
    """``backend``'s client behind the node's response cache, as ``settings`` say."""
    return cached(backend.create(), backend.spec, enabled=settings.cache, payer=settings.payer)
