"""A cluster-wide rate limiter per endpoint: requests and tokens per minute, and calls in flight.

Every role actor on every node that calls an endpoint asks the same named
`RateLimiter` actor (``redraft-ratelimit-<endpoint>``, created on first use) for
permission before each call and reports the tokens it really used afterwards.
Limits are a strict sliding window (at most ``requests`` grants and ``tokens``
tokens in any ``window_s`` seconds), not a token bucket, which would let up to
twice the limit through in a minute. Grants are first come, first served.

A spec string carries its limits as a query: ``openai:gpt-4o-mini?rpm=500&tpm=200000&inflight=32``.
Outside Ray the limiter is an object in this process.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from redraft.backends.base import Backend, BackendSpec, ChatRequest, Completion
from redraft.errors import UserError, did_you_mean
from redraft.services import Services, current


class RateLimits(msgspec.Struct, frozen=True, kw_only=True):
    requests: int | None = None
    """Grants per window (``rpm`` with the default 60 s window)."""
    tokens: int | None = None
    """Tokens per window (``tpm``): estimated at grant, corrected to the real count after."""
    max_in_flight: int | None = None
    window_s: float = 60.0

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.requests, self.tokens, self.max_in_flight))


class RateLimiter:
    """The limiter's state machine; a Ray actor in a cluster. Clock and sleep are injected for tests."""

    def __init__(
        self,
        limits: RateLimits,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.limits = limits
        self._clock, self._sleep = clock, sleep
        self._grants: deque[tuple[float, int, int]] = deque()  # (time, ticket, tokens)
        self._tokens_by_ticket: dict[int, int] = {}
        self._in_flight = 0
        self._next_ticket = 0
        self._turn: asyncio.Lock | None = None
        self._turn_loop: asyncio.AbstractEventLoop | None = None

    async def acquire(self, estimated_tokens: int) -> int:
        """Wait until a call may start; returns a ticket for `release`."""
        loop = asyncio.get_running_loop()
        if self._turn is None or self._turn_loop is not loop:  # an in-process limiter may see several loops
            self._turn, self._turn_loop = asyncio.Lock(), loop
        async with self._turn:  # FIFO: one waiter at a time is the next to be granted
            while (wait := self._wait_s(estimated_tokens)) > 0:
                await self._sleep(wait)
            ticket = self._next_ticket
            self._next_ticket += 1
            self._grants.append((self._clock(), ticket, estimated_tokens))
            self._tokens_by_ticket[ticket] = estimated_tokens
            self._in_flight += 1
            return ticket

    async def release(self, ticket: int, used_tokens: int) -> None:
        """The call is over; count the tokens it really used instead of the estimate."""
        self._in_flight -= 1
        if ticket in self._tokens_by_ticket:
            self._tokens_by_ticket[ticket] = used_tokens

    def _wait_s(self, tokens: int) -> float:
        """0 if a grant of ``tokens`` fits now, else how long to wait before looking again."""
        now, lim = self._clock(), self.limits
        while self._grants and self._grants[0][0] <= now - lim.window_s:
            _, ticket, _ = self._grants.popleft()
            self._tokens_by_ticket.pop(ticket, None)
        if lim.max_in_flight is not None and self._in_flight >= lim.max_in_flight:
            return 0.05  # a release, not the clock, frees a slot: poll briefly
        expiry = self._grants[0][0] + lim.window_s - now if self._grants else 0.0
        if lim.requests is not None and len(self._grants) >= lim.requests:
            return max(expiry, 1e-3)
        in_window = sum(self._tokens_by_ticket.values())
        if lim.tokens is not None and self._grants and in_window + tokens > lim.tokens:
            return max(expiry, 1e-3)
        return 0.0


class RateLimitedBackend:
    """Asks the endpoint's limiter before every call of ``inner``."""

    def __init__(self, inner: Backend, limiter: Any, services: Services) -> None:
        self._inner = inner
        self._limiter = limiter
        self._services = services

    async def complete(self, request: ChatRequest) -> Completion:
        estimate = sum(len(m.content) for m in request.messages) // 4 + request.max_tokens
        ticket = await self._services.call(self._limiter, "acquire", estimate)
        used = estimate
        try:
            completion = await self._inner.complete(request)
            used = completion.usage.total_tokens
            return completion
        finally:
            await self._services.call(self._limiter, "release", ticket, used)


def _limiter_for(services: Services, endpoint: str, limits: RateLimits) -> Any:
    """The endpoint's one limiter: shared by the whole cluster (a named actor), or an object of a plain process."""
    digest = hashlib.sha1(endpoint.encode()).hexdigest()[:12]
    return services.shared(
        RateLimiter, f"redraft-ratelimit-{digest}", limits, per_node=False, num_cpus=0, max_concurrency=10_000
    )


@dataclass(frozen=True)
class LimitedSpec:
    """A backend spec whose calls go through its endpoint's cluster-wide limiter."""

    inner: BackendSpec
    limits: RateLimits
    endpoint: str = field(default="")

    @property
    def spec(self) -> str:
        return self.inner.spec

    def create(self) -> Backend:
        services = current()
        limiter = _limiter_for(services, self.endpoint or self.spec, self.limits)
        return RateLimitedBackend(self.inner.create(), limiter, services)


_QUERY_KEYS = {"rpm": "requests", "tpm": "tokens", "inflight": "max_in_flight"}
QUERY_RANGES = {"rpm": (1, 10_000_000), "tpm": (1, 10**12), "inflight": (1, 100_000)}
"""The range each rate limit of a spec's query may take."""


def split_limits(spec: str) -> tuple[str, RateLimits]:
    """``openai:m?rpm=60&tpm=1000&inflight=4`` -> (``openai:m``, its limits); no query: no limits.

    `UserError` naming the limit, the spec and the range for anything else: an unknown or repeated
    key, a value that is not a whole number, or one out of its range.
    """
    base, _, query = spec.partition("?")
    shown = _shown(spec)
    values: dict[str, Any] = {}
    for pair in query.split("&") if query else []:
        key, equals, value = pair.partition("=")
        if key not in _QUERY_KEYS:
            near = did_you_mean(key, _QUERY_KEYS)
            raise UserError(f"unknown rate limit {_shown(key)} in {shown} ({near}known: {', '.join(_QUERY_KEYS)})")
        if _QUERY_KEYS[key] in values:
            raise UserError(f"rate limit {key} is given twice in {shown}")
        low, high = QUERY_RANGES[key]
        if not (equals and value.isascii() and value.isdigit()):
            raise UserError(f"rate limit {key}={_shown(value)} in {shown} is not a whole number")
        number = int(value) if len(value) <= 20 else None  # never int() of 5,000 digits
        if number is None or not low <= number <= high:
            raise UserError(f"rate limit {key} must be in [{low:,}, {high:,}] in {shown}, got {_shown(value)}")
        values[_QUERY_KEYS[key]] = number
    return base, RateLimits(**values)


def _shown(text: str, limit: int = 80) -> str:
    """``text`` quoted for a one-line message, cut at ``limit`` characters."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")
