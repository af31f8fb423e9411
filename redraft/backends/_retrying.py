"""The one layer that retries a failed model call, and the rules for what is worth retrying.

Three layers could retry a call; exactly one does for each kind of fault:

- The vendor SDK clients (openai, anthropic) are created with ``max_retries=0``:
  their own retries would multiply with ours and hide how many requests a call
  really made.
- Ray retries a role-actor call only when the actor process dies (a lost node,
  a crash), never because of a model's HTTP error.
- This module retries transport and server faults: HTTP 408, 409, 429, 5xx
  (529 included), timeouts, dropped connections and unreadable replies, which a
  backend raises as `RetryableBackendError`. `PermanentBackendError` (400, 404,
  422) and `AuthenticationError` (401, 403) propagate at once: sending the same
  request again cannot change the answer.

When the attempts run out, the call fails with `BackendUnavailableError`, naming
the endpoint: the server failed for the whole retry window, which is the
machinery's failure, not the task's. The arbiter hands it to the driver, which
redoes the task later and, when several tasks find the same endpoint down with
no success between them, stops the run (`redraft.actors._attempts.Breaker`).

Error messages built here never hold a credential: `redact` removes the API key
from any text that came back from a server.

See docs/architecture.md, section "Retries: the gate and the backoff".
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import json
import logging
import math
import random
import re
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from redraft.errors import (
    AuthenticationError,
    BackendError,
    BackendUnavailableError,
    PermanentBackendError,
    RetryableBackendError,
)

T = TypeVar("T")

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""Besides every 5xx (529, "overloaded", included)."""

MAX_DETAIL_CHARS = 300
"""A server's error text is cut to this length in our messages (some proxies answer with whole HTML pages)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently `with_retries` tries a call.

    Invariant: the wait after any failed attempt is at most
    ``max(max_delay_s, max_retry_after_s)``.
    """

    max_attempts: int = 5
    """Attempts in all, the first one included; 1 disables retrying."""
    base_delay_s: float = 0.5
    """The backoff after the first failure; it doubles after each further one."""
    max_delay_s: float = 30.0
    """The backoff never grows past this."""
    jitter: bool = True
    """Full jitter: wait uniformly in [0, backoff]. False waits the whole backoff (predictable, for tests)."""
    max_retry_after_s: float = 60.0
    """A server's ``Retry-After`` is honoured up to this; a longer one is cut to it."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if min(self.base_delay_s, self.max_delay_s, self.max_retry_after_s) < 0:
            raise ValueError("retry delays must not be negative")

    def delay_s(self, failures: int, error: RetryableBackendError, rng: random.Random) -> float:
        """Seconds to wait after the ``failures``-th failed attempt (1-based) that raised ``error``."""
        # min() before the power would overflow: 2**1100 is not a float.
        backoff = min(self.max_delay_s, self.base_delay_s * 2.0 ** min(failures - 1, 64))
        wait = rng.uniform(0.0, backoff) if self.jitter else backoff
        if error.retry_after_s is not None:
            wait = max(wait, min(error.retry_after_s, self.max_retry_after_s))
        return wait


_default_rng = random.Random()


class AttemptGate(Protocol):
    """What each attempt of a call passes through: it may wait before the attempt and learns how it went."""

    async def attempt(self, call: Callable[[], Awaitable[T]]) -> T: ...


attempt_gate: ContextVar[AttemptGate | None] = ContextVar("redraft_attempt_gate", default=None)
"""The gate of the endpoint the current call goes to (set around a call by a rate-limited backend)."""


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    what: str = "model call",
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> T:
    """Await ``call()``, calling it again after each `RetryableBackendError`, up to ``policy.max_attempts``.

    Any other exception propagates at once. When the attempts run out, the last
    error is raised again as `BackendUnavailableError` with the number of attempts
    added to its message. ``what`` names the call in log lines and is the error's
    ``endpoint`` (a backend spec, never a secret).
    """
    rng = rng or _default_rng
    gate = attempt_gate.get()
    attempt = 1
    while True:
        try:
            return await (call() if gate is None else gate.attempt(call))
        except RetryableBackendError as exc:
            if attempt >= policy.max_attempts:
                raise BackendUnavailableError(
                    f"{exc} (gave up after {attempt} attempt{'s' if attempt > 1 else ''})",
                    endpoint=what,
                    status=exc.status,
                    retry_after_s=exc.retry_after_s,
                ) from None
            wait = policy.delay_s(attempt, exc, rng)
            log.warning(
                "%s failed (attempt %d of %d), retrying in %.2fs: %s", what, attempt, policy.max_attempts, wait, exc
            )
            await sleep(wait)
            attempt += 1


def retry_after_s(headers: Mapping[str, str], *, now: Callable[[], float] = time.time) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``Retry-After`` in seconds or as an HTTP date,
    else the providers' rate-limit headers: when a limit's remaining count is 0, the time until it resets
    (OpenAI: ``x-ratelimit-reset-requests: 6m0s``; Anthropic: ``anthropic-ratelimit-tokens-reset`` as an
    RFC 3339 time), the longest of those exhausted."""
    milliseconds = _finite(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return max(0.0, milliseconds / 1000)
    value = headers.get("retry-after")
    if value is None:
        return _exhausted_limit_resets(headers, now)
    seconds = _finite(value)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - now())


_RATE_LIMITS = (
    ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"),
    ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"),
    ("anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset"),
    ("anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset"),
)
"""(remaining, reset) header pairs of the providers' rate limits."""
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?")


def _exhausted_limit_resets(headers: Mapping[str, str], now: Callable[[], float]) -> float | None:
    waits = [
        wait
        for remaining, reset in _RATE_LIMITS
        if _finite(headers.get(remaining)) == 0 and (wait := _until_reset(headers.get(reset), now)) is not None
    ]
    return max(waits) if waits else None


def _until_reset(value: str | None, now: Callable[[], float]) -> float | None:
    """Seconds until a rate limit resets: OpenAI's duration (``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``) or
    Anthropic's RFC 3339 time."""
    if not value:
        return None
    match = _DURATION.fullmatch(value.strip())
    if match and any(match.groups()):
        hours, minutes, seconds, millis = (float(g) if g else 0.0 for g in match.groups())
        return hours * 3600 + minutes * 60 + seconds + millis / 1000
    try:
        when = datetime.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now())


def _finite(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def redact(text: str, secret: str | None) -> str:
    """``text`` without ``secret`` in it (servers and proxies sometimes echo what they were sent)."""
    return text.replace(secret, "[redacted]") if secret else text


def server_detail(body: object, secret: str | None) -> str:
    """The human-readable message of an error body, in either vendor's shape, redacted and cut short."""
    detail: object = body
    if isinstance(detail, Mapping):
        detail = detail.get("error", detail)
    if isinstance(detail, Mapping):
        detail = detail.get("message", detail)
    text = redact(" ".join(str(detail).split()), secret)
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 3] + "..."


def error_for_status(
    status: int, body: object, headers: Mapping[str, str], *, spec: str, key_env: str, secret: str | None
) -> BackendError:
    """The redraft error for an HTTP error response from the backend named by ``spec``.

    401 and 403 name the variable to fix, never the key; the 401 message leaves
    out the server's text, which may echo part of the key.
    """
    if status == 401:
        return AuthenticationError(f"{spec}: the API key was refused (HTTP 401); check {key_env}")
    detail = server_detail(body, secret)
    if status == 403:
        return AuthenticationError(f"{spec}: permission denied (HTTP 403): {detail}; check {key_env}")
    if status in RETRYABLE_STATUSES or status >= 500:
        return RetryableBackendError(
            f"{spec}: HTTP {status}: {detail}", status=status, retry_after_s=retry_after_s(headers)
        )
    if status == 404:
        hint = "check the model's name, and that the server's address ends where its API begins (often /v1)"
        return PermanentBackendError(f"{spec}: HTTP 404: {detail}; {hint}")
    return PermanentBackendError(f"{spec}: HTTP {status}: {detail}")


def transport_error(exc: BaseException, *, spec: str, timeout_s: float, secret: str) -> RetryableBackendError:
    """The error of a call that got no HTTP answer, named by its root cause and what to do about it.

    The cause is read from the exception's chain, not its class: the SDKs' transport reports a refused
    connection, an unknown host and a failed TLS handshake alike as a connect *timeout*.
    """
    chain = _chain(exc)
    where = next((_address(e) for e in chain if isinstance(getattr(e, "host", None), str)), "the server")
    root = chain[-1]
    if any(isinstance(e, ssl.SSLError | ssl.CertificateError) for e in chain):
        reason = getattr(root, "reason", None) or redact(str(root), secret)
        why = f"TLS with {where} failed ({reason}): an http:// server addressed as https://, or a certificate "
        return RetryableBackendError(f"{spec}: {why}this machine does not trust")
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return RetryableBackendError(f"{spec}: connection refused by {where}: is its server running, at that address?")
    if any(isinstance(e, socket.gaierror) for e in chain):
        return RetryableBackendError(f"{spec}: cannot resolve the host of {where}: check the address and the network")
    if any(isinstance(e, TimeoutError) for e in chain):
        return RetryableBackendError(f"{spec}: no reply within {timeout_s:g}s: the server is slow or overloaded")
    return RetryableBackendError(f"{spec}: connection failed: {redact(str(root) or type(root).__name__, secret)}")


def _address(exc: BaseException) -> str:
    """``host:port`` of a connector's error (aiohttp's name the address they tried)."""
    return f"{getattr(exc, 'host', '')}:{getattr(exc, 'port', '')}".rstrip(":")


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from, outermost first (at most 16: a chain may loop)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 16:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def sdk_error(
    exc: Exception, sdk: Any, *, spec: str, timeout_s: float, key_env: str, secret: str, reply: str
) -> BackendError:
    """The redraft error for an exception from the ``openai`` or ``anthropic`` SDK (or its JSON decoder).

    Both SDKs are generated from one template and share these exception classes;
    ``sdk`` is the imported module, ``reply`` names what a valid reply is.
    """
    if isinstance(exc, sdk.APIConnectionError):  # APITimeoutError among them, for a refused connection too
        return transport_error(exc, spec=spec, timeout_s=timeout_s, secret=secret)
    if isinstance(exc, sdk.APIStatusError):
        return error_for_status(
            exc.status_code, exc.body, exc.response.headers, spec=spec, key_env=key_env, secret=secret
        )
    if isinstance(exc, sdk.APIResponseValidationError | json.JSONDecodeError):
        return RetryableBackendError(f"{spec}: the reply was not a valid {reply} (bad JSON)")
    return BackendError(f"{spec}: {redact(str(exc), secret)}")
