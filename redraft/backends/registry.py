"""The spec strings that select a backend, and the registry of their parsers.

Backends register by spec prefix with `@backend("prefix")`; built-ins and third
parties alike are found through the ``redraft.backends`` entry-point group.
`resolve` parses a spec string on the driver into a picklable `BackendSpec`, so a
bad spec is a `UserError` before any actor starts.
"""

from __future__ import annotations

from collections.abc import Callable

from redraft.backends._ratelimit import LimitedSpec, split_limits
from redraft.backends.base import BackendSpec
from redraft.errors import UserError
from redraft.plugins import Registry

BACKENDS: Registry[Callable[[str], BackendSpec]] = Registry("backend", "redraft.backends")
backend = BACKENDS.register
"""Register a parser for spec strings ``prefix`` or ``prefix:REST``: ``@backend("prefix")``; it gets REST."""


def backend_prefixes() -> list[str]:
    return BACKENDS.names()


def resolve(spec: str) -> BackendSpec:
    """Parse and validate a spec string; `UserError` if it names nothing usable.

    A query sets the endpoint's cluster-wide rate limits: ``openai:m?rpm=500&tpm=200000&inflight=32``.
    """
    base, limits = split_limits(spec)
    prefix, _, rest = base.partition(":")
    if prefix not in BACKENDS.names():
        known = ", ".join(f"{p}[:...]" for p in BACKENDS.names())
        raise UserError(f"unknown backend spec {spec!r} (known: {known})")
    parsed = BACKENDS.get(prefix)(rest)
    return LimitedSpec(parsed, limits, endpoint=base) if limits.active else parsed
