"""The spec strings that select a backend, and the registry of their parsers.

Backends register by spec prefix with `@backend("prefix")`; built-ins and third
parties alike are found through the ``redraft.backends`` entry-point group.
`resolve` parses a spec string on the driver into a picklable `BackendSpec`, so a
bad spec is a `UserError` before any actor starts.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from redraft.backends._ratelimit import LimitedSpec, split_limits
from redraft.backends.base import BackendSpec
from redraft.errors import unknown_name
from redraft.plugins import Registry

BACKENDS: Registry[Callable[[str], BackendSpec]] = Registry("backend", "redraft.backends")
backend = BACKENDS.register
"""Register a parser for spec strings ``prefix`` or ``prefix:REST``: ``@backend("prefix")``; it gets REST."""


def backend_prefixes() -> list[str]:
    return BACKENDS.names()


def resolve(spec: str) -> BackendSpec:
    """Parse and validate a spec string; `UserError` if it names nothing usable.

    A query sets the endpoint's cluster-wide rate limits: ``openai:m?rpm=500&tpm=200000&inflight=32``. A remote
    endpoint's calls in flight adapt to its throttling unless the query says ``adaptive=0``.
    """
    base, limits = split_limits(spec)
    prefix, _, rest = base.partition(":")
    prefixes = BACKENDS.names()
    if prefix not in prefixes:  # the suggestion: the same spec with the prefix meant
        like = [p + spec[len(prefix) :] for p in prefixes]
        raise unknown_name("backend spec", spec, [f"{p}[:...]" for p in prefixes], like=like)
    parsed = BACKENDS.get(prefix)(rest)
    if limits.adaptive is None:
        limits = msgspec.structs.replace(limits, adaptive=bool(getattr(parsed, "remote", False)))
    return LimitedSpec(parsed, limits, endpoint=base) if limits.active else parsed
