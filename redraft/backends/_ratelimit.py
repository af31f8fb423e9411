"""A cluster-wide rate limiter per endpoint: requests and tokens per minute, and calls in flight.

Every role actor on every node that calls an endpoint asks the same named
`RateLimiter` actor (``redraft-ratelimit-<endpoint>``, created on first use) for
permission before each attempt of a call and reports afterwards the tokens it
really used and whether the server throttled it. Limits are a strict sliding
window (at most ``requests`` grants and ``tokens`` tokens in any ``window_s``
seconds), not a token bucket, which would let up to twice the limit through in a
minute. Grants are first come, first served.

Adaptive concurrency (on by default for remote endpoints: ``openai:``,
``anthropic:``, ``openai-compatible:``) finds the endpoint's own limit, as TCP
finds a link's: the calls allowed in flight start at `START_WINDOW`, grow by one
per success until the first throttle (slow start), then by one per window's
worth of successes; a 429 (or 529, overloaded) halves them, once per window of
calls in flight (the throttles of calls granted before the cut do not cut again),
and holds every grant for the server's ``Retry-After``. ``inflight=`` is then
the ceiling, and ``adaptive=0`` turns it off.

A spec string carries its limits as a query: ``openai:gpt-4o-mini?rpm=500&tpm=200000&inflight=32``.
Outside Ray the limiter is an object in this process.

See docs/architecture.md, section "A limiter asked only once an endpoint throttles".
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import msgspec

from redraft.backends._retrying import attempt_gate
from redraft.backends.base import Backend, BackendSpec, ChatRequest, Completion
from redraft.errors import RetryableBackendError, UserError, did_you_mean
from redraft.services import Services, current

T = TypeVar("T")

START_WINDOW = 8.0
"""Calls an adaptive limiter lets in flight before it has learned anything."""
CEILING = 4096
"""An adaptive limiter's calls in flight never grow past this (nor past ``inflight=``)."""
THROTTLES = frozenset({429, 529})
"""The statuses that say "too many": rate limited, overloaded."""

Outcome = Literal["ok", "throttled", "failed"]


class RateLimits(msgspec.Struct, frozen=True, kw_only=True):
    requests: int | None = None
    """Grants per window (``rpm`` with the default 60 s window)."""
    tokens: int | None = None
    """Tokens per window (``tpm``): estimated at grant, corrected to the real count after."""
    max_in_flight: int | None = None
    window_s: float = 60.0
    adaptive: bool | None = None
    """Calls in flight adapt to the server's throttling (up to ``max_in_flight``), see the module docstring;
    None: the backend's default (on for remote endpoints, `redraft.backends.registry.resolve`)."""

    @property
    def active(self) -> bool:
        return bool(self.adaptive) or self.fixed

    @property
    def fixed(self) -> bool:
        """Some limit is given: every call asks the limiter, from the first."""
        return any(v is not None for v in (self.requests, self.tokens, self.max_in_flight))


class EndpointState(msgspec.Struct, frozen=True, kw_only=True):
    """What an endpoint's limiter shows: for the progress line and the metrics."""

    endpoint: str
    in_flight: int
    window: float | None
    """Calls an adaptive limiter allows in flight now (None: not adaptive, or not throttled yet)."""
    throttled: int
    """Attempts the server throttled (429, 529) since the limiter started."""


class RateLimiter:
    """The limiter's state machine; a Ray actor in a cluster. Clock and sleep are injected for tests."""

    def __init__(
        self,
        limits: RateLimits,
        endpoint: str = "",
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.limits = limits
        self.endpoint = endpoint
        self._clock, self._sleep = clock, sleep
        self._ceiling = float(min(limits.max_in_flight or CEILING, CEILING))
        self._window: float | None = None
        self._slow_start = True
        self._cut_before = 0
        """A throttled call granted before this ticket was granted before the last cut: it does not cut again."""
        self._paused_until = 0.0
        self._throttled = 0
        self._grants: deque[tuple[float, int, int]] = deque()  # (time, ticket, tokens)
        self._tokens_by_ticket: dict[int, int] = {}
        self._in_flight = 0
        self._next_ticket = 0
        self._turn: asyncio.Lock | None = None
        self._turn_loop: asyncio.AbstractEventLoop | None = None
        if limits.fixed:  # asked from the first call: adapting from the first, if adaptive
            self._adapt()

    async def acquire(self, estimated_tokens: int) -> int:
        """Wait until a call may start; returns a ticket for `release`."""
        self._adapt()  # asked: by a process that saw a throttle, if this limiter was made again since
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

    async def release(
        self, ticket: int, used_tokens: int, outcome: Outcome = "ok", retry_after_s: float | None = None
    ) -> None:
        """The attempt is over; count the tokens it really used instead of the estimate, and adapt to how it
        went: a success widens the window, a throttle halves it and holds grants for ``retry_after_s``."""
        self._in_flight -= 1
        if ticket in self._tokens_by_ticket:
            self._tokens_by_ticket[ticket] = used_tokens
        if outcome == "throttled":
            self._note_throttle(retry_after_s)
        if self._window is None:
            return
        if outcome == "ok":
            grow = 1.0 if self._slow_start else 1.0 / self._window
            self._window = min(self._ceiling, self._window + grow)
        elif outcome == "throttled" and ticket >= self._cut_before:
            self._window = max(1.0, self._window / 2)
            self._slow_start = False
            self._cut_before = self._next_ticket

    async def engage(self, retry_after_s: float | None) -> None:
        """A call that did not ask was throttled: from now on its process asks (see the module docstring)."""
        self._note_throttle(retry_after_s)
        self._adapt()

    def _adapt(self) -> None:
        """Start adapting (at `START_WINDOW`, in slow start), if adaptive and not already."""
        if self._window is None and self.limits.adaptive:
            self._window = min(START_WINDOW, self._ceiling)

    def _note_throttle(self, retry_after_s: float | None) -> None:
        """Count a throttled attempt, and hold every grant for the server's ``Retry-After``."""
        self._throttled += 1
        if retry_after_s is not None:
            self._paused_until = max(self._paused_until, self._clock() + retry_after_s)

    def state(self) -> EndpointState:
        return EndpointState(
            endpoint=self.endpoint, in_flight=self._in_flight, window=self._window, throttled=self._throttled
        )

    def _wait_s(self, tokens: int) -> float:
        """0 if a grant of ``tokens`` fits now, else how long to wait before looking again."""
        now, lim = self._clock(), self.limits
        while self._grants and self._grants[0][0] <= now - lim.window_s:
            _, ticket, _ = self._grants.popleft()
            self._tokens_by_ticket.pop(ticket, None)
        if now < self._paused_until:
            return self._paused_until - now
        cap = lim.max_in_flight if self._window is None else math.floor(self._window)
        if cap is not None and self._in_flight >= cap:
            return 0.05  # a release, not the clock, frees a slot: poll briefly
        expiry = self._grants[0][0] + lim.window_s - now if self._grants else 0.0
        if lim.requests is not None and len(self._grants) >= lim.requests:
            return max(expiry, 1e-3)
        in_window = sum(self._tokens_by_ticket.values())
        if lim.tokens is not None and self._grants and in_window + tokens > lim.tokens:
            return max(expiry, 1e-3)
        return 0.0


_THROTTLED: set[str] = set()
"""The endpoints this process has seen throttled: it asks their limiters from then on."""


class RateLimitedBackend:
    """Asks the endpoint's limiter before every attempt of every call of ``inner`` (the backend's retry layer
    passes each attempt through `attempt_gate`), and tells it how the attempt went."""

    def __init__(self, inner: Backend, limiter: Any, services: Services, endpoint: str, *, lazy: bool) -> None:
        self._inner = inner
        self._limiter = limiter
        self._services = services
        self._endpoint = endpoint
        self._lazy = lazy

    async def complete(self, request: ChatRequest) -> Completion:
        gate = _Gate(self._limiter, self._services, request, self._endpoint, self._lazy)
        if not getattr(self._inner, "gates_attempts", False):  # no retry layer: the call is its one attempt
            return await gate.attempt(lambda: self._inner.complete(request))
        token = attempt_gate.set(gate)
        try:
            return await self._inner.complete(request)
        finally:
            attempt_gate.reset(token)


@dataclass
class _Gate:
    """One call's pass through its endpoint's limiter, attempt by attempt."""

    limiter: Any
    services: Services
    request: ChatRequest
    endpoint: str
    lazy: bool
    """Not asked until the endpoint is throttled (no limit given: see the module docstring)."""

    async def attempt(self, call: Callable[[], Awaitable[T]]) -> T:
        if self.lazy and self.endpoint not in _THROTTLED:
            try:
                return await call()
            except RetryableBackendError as exc:
                if exc.status in THROTTLES:
                    _THROTTLED.add(self.endpoint)
                    await self.services.call(self.limiter, "engage", exc.retry_after_s)
                raise
        estimate = sum(len(m.content) for m in self.request.messages) // 4 + self.request.max_tokens
        ticket = await self.services.call(self.limiter, "acquire", estimate)
        used, outcome, wait = estimate, "failed", None  # failed: neither widens nor cuts the window
        try:
            result = await call()
            usage = getattr(result, "usage", None)
            used, outcome = (usage.total_tokens if usage is not None else estimate), "ok"
            return result
        except RetryableBackendError as exc:
            if exc.status in THROTTLES:
                outcome, wait = "throttled", exc.retry_after_s
            raise
        finally:
            await self.services.call(self.limiter, "release", ticket, used, outcome, wait)


LIMITER_PREFIX = "redraft-ratelimit-"


def _limiter_for(services: Services, endpoint: str, limits: RateLimits) -> Any:
    """The endpoint's one limiter: shared by the whole cluster (a named actor), or an object of a plain process."""
    digest = hashlib.sha1(endpoint.encode()).hexdigest()[:12]
    return services.shared(
        RateLimiter,
        f"{LIMITER_PREFIX}{digest}",
        limits,
        endpoint,
        per_node=False,
        num_cpus=0,
        max_concurrency=10_000,
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

    @property
    def model(self) -> str:
        """The model its calls are priced by: the limited spec's (its spec string if it names none)."""
        return str(getattr(self.inner, "model", self.inner.spec))

    def create(self) -> Backend:
        services, endpoint = current(), self.endpoint or self.spec
        limiter = _limiter_for(services, endpoint, self.limits)
        return RateLimitedBackend(self.inner.create(), limiter, services, endpoint, lazy=not self.limits.fixed)


_QUERY_KEYS = {"rpm": "requests", "tpm": "tokens", "inflight": "max_in_flight", "adaptive": "adaptive"}
QUERY_RANGES = {"rpm": (1, 10_000_000), "tpm": (1, 10**12), "inflight": (1, 100_000), "adaptive": (0, 1)}
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
        values[_QUERY_KEYS[key]] = bool(number) if key == "adaptive" else number
    return base, RateLimits(**values)


def _shown(text: str, limit: int = 80) -> str:
    """``text`` quoted for a one-line message, cut at ``limit`` characters."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")
