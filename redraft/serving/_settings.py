"""What a server is started with: `ServeSettings`, plain data that travels to every replica.

The run options (``--model``, ``--strategy``, ``--samples``...) are kept flat, as `redraft.config.RunConfig.build`
takes them: they are the defaults every request starts from. API keys are kept only as SHA-256 digests, so the
settings can be written to a Serve config, logged or pickled to a replica without holding a secret.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec

from redraft.errors import UserError

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


class ServeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """A server's settings; the request limits are what one request may ask at most."""

    run: dict[str, Any] = {}
    """Flat run settings (``redraft run``'s options by field name): every request's defaults."""
    checks: dict[str, str] = {}
    """Checks a request may name: NAME -> ``MODULE:FUNCTION``. A built-in scenario's name names its check too."""
    aliases: dict[str, str] = {}
    """Served model names: ALIAS -> ``redraft/STRATEGY`` or ``redraft/STRATEGY/MODEL``."""
    host: str = "127.0.0.1"
    port: int = 8000
    key_digests: list[str] = []
    """SHA-256 hex digests of the accepted API keys (`digest`); none: no key asked (loopback only)."""
    out: str | None = None
    """Where the traces go: a run directory per day and replica under it (default ``runs/serve``)."""
    request_timeout_s: float = 300.0
    """A request's loop is cut here, answered with its best so far (or 504 when it has none)."""
    max_request_bytes: int = 1_000_000
    max_tokens: int = 4096
    """The most ``max_tokens`` a request may ask per draft."""
    max_samples: int = 8
    max_rounds: int = 8
    usd_per_period: float | None = None
    """The server's money budget: once its requests cost this much in a period, the rest are refused."""
    period_s: float = 86_400.0
    drain_s: float = 5.0
    """On SIGINT or SIGTERM: how long the requests in flight have to finish and be recorded before the server
    stops; a loop still running then is cut and not recorded (`redraft.serving.serve_on_ray` says how on Ray)."""
    fleet_idle_s: float = 600.0
    """On Ray: a replica's role actors are stopped once no request has come for this long, started again by the
    next (`redraft.actors.FleetArbiters`)."""

    def validate(self) -> None:
        """`UserError` for settings that cannot serve: an open host with no key, a bad limit."""
        if not self.key_digests and self.host not in LOOPBACK:
            raise UserError(
                f"--host {self.host} is reachable from other machines: give --api-key or --api-keys-file "
                "(without a key redraft serve binds to loopback only)"
            )
        for name, value in (
            ("--request-timeout", self.request_timeout_s),
            ("--max-request-bytes", self.max_request_bytes),
        ):
            if value <= 0:
                raise UserError(f"{name} must be above 0, got {value}")
        if self.drain_s < 0:
            raise UserError(f"--drain-timeout must be at least 0, got {self.drain_s:g}")
        if self.fleet_idle_s < 0:
            raise UserError(f"--fleet-idle must be at least 0, got {self.fleet_idle_s:g}")
        if self.usd_per_period is not None and self.usd_per_period < 0:
            raise UserError(f"--usd-per-day must be at least 0, got {self.usd_per_period}")


def digest(key: str) -> str:
    """A key's SHA-256 hex digest: what the settings keep and a request's key is compared with."""
    return hashlib.sha256(key.encode()).hexdigest()


def key_digests(key: str | None, keys_file: Path | None) -> list[str]:
    """The digests of ``--api-key`` and of each non-blank line of ``--api-keys-file``; `UserError` for a file that
    cannot be read or holds no key."""
    keys = [key] if key else []
    if keys_file is not None:
        try:
            lines = keys_file.read_text().splitlines()
        except OSError as exc:
            raise UserError(f"--api-keys-file {keys_file}: {exc.strerror}") from None
        found = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        if not found:
            raise UserError(f"--api-keys-file {keys_file} holds no key (one a line)")
        keys += found
    return [digest(k) for k in keys]


def named_pairs(given: list[str], option: str, shape: str) -> dict[str, str]:
    """``NAME=VALUE`` options (``--check``, ``--alias``) as a dict; `UserError` naming the bad one."""
    pairs: dict[str, str] = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise UserError(f"{option} takes {shape}, got {item!r}")
        if name.strip() in pairs:
            raise UserError(f"{option} {name.strip()!r} is given twice")
        pairs[name.strip()] = value.strip()
    return pairs
