"""What a request must pass before its loop starts, and what the server counts after: its key, the server's money
for the period, the figures it reports.

Keys are compared as SHA-256 digests with `hmac.compare_digest`, against every accepted key (no early exit), so
the time a refusal takes says nothing about how near a guess was; a key is never logged nor kept.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections.abc import Callable
from typing import Protocol

from redraft.serving._openai import APIError


def authorize(header: str | None, digests: list[str]) -> None:
    """`APIError` 401 unless ``header`` is ``Bearer KEY`` for an accepted key (none accepted: no key asked)."""
    if not digests:
        return
    scheme, _, key = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise APIError(
            401,
            "an API key is required: send Authorization: Bearer KEY",
            "authentication_error",
            code="invalid_api_key",
        )
    given = hashlib.sha256(key.strip().encode()).hexdigest().encode()
    matched = False
    for accepted in digests:
        matched |= hmac.compare_digest(given, accepted.encode())
    if not matched:
        raise APIError(401, "incorrect API key provided", "authentication_error", code="invalid_api_key")


class Spending(Protocol):
    """The server's money spent in the current period, shared by whoever serves (a replica, or all of them)."""

    def spent(self) -> float: ...

    def add(self, usd: float) -> None: ...


class PeriodSpending:
    """`Spending` in this process: the period starts at the first request and restarts every ``period_s``."""

    def __init__(self, period_s: float, clock: Callable[[], float] = time.time) -> None:
        self._period_s, self._clock = period_s, clock
        self._started, self._usd = clock(), 0.0
        self._lock = threading.Lock()

    def spent(self) -> float:
        with self._lock:
            self._roll()
            return self._usd

    def add(self, usd: float) -> None:
        with self._lock:
            self._roll()
            self._usd += usd

    def seconds_left(self) -> float:
        return max(0.0, self._started + self._period_s - self._clock())

    def _roll(self) -> None:
        now = self._clock()
        if now - self._started >= self._period_s:
            self._started, self._usd = now - (now - self._started) % self._period_s, 0.0


def admit(spending: Spending, limit: float | None, period_s: float) -> None:
    """`APIError` 429 once the server's money for the period is spent."""
    if limit is not None and spending.spent() >= limit:
        raise APIError(
            429,
            f"this server's budget of {limit:g} USD per {period_s:g} s is spent; try again in the next period",
            "insufficient_quota",
            code="insufficient_quota",
        )


class Metrics(Protocol):
    """What the server reports of each request (on Ray Serve, as Ray metrics: `redraft.serving._deployment`)."""

    def request(self, route: str, status: int, seconds: float, calls: int, usd: float) -> None: ...


class CountedMetrics:
    """`Metrics` kept in this process: the totals, read by tests and by a server with no Ray."""

    def __init__(self) -> None:
        self.requests: dict[int, int] = {}
        self.calls = 0
        self.usd = 0.0
        self.seconds: list[float] = []

    def request(self, route: str, status: int, seconds: float, calls: int, usd: float) -> None:
        self.requests[status] = self.requests.get(status, 0) + 1
        self.calls += calls
        self.usd += usd
        self.seconds.append(seconds)
