"""The cluster-wide rate limiter: a strict sliding window, checked on a fake clock.

Across two nodes of a Ray cluster: tests/integration/test_ratelimit_on_ray.py.
"""

from __future__ import annotations

import asyncio

import pytest

from redraft.backends._ratelimit import LimitedSpec, RateLimiter, RateLimits, split_limits
from redraft.backends.registry import resolve
from redraft.errors import UserError


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def grant_times(limits: RateLimits, calls: list[tuple[int, int]]) -> list[float]:
    """Acquire for each (estimated, used) tokens in order, releasing at once; return the grant times."""
    fake = FakeTime()
    limiter = RateLimiter(limits, clock=fake.clock, sleep=fake.sleep)

    async def go() -> list[float]:
        times = []
        for estimated, used in calls:
            ticket = await limiter.acquire(estimated)
            times.append(fake.now)
            await limiter.release(ticket, used)
        return times

    return asyncio.run(go())


def test_requests_per_window_is_strict() -> None:
    times = grant_times(RateLimits(requests=3, window_s=60), [(1, 1)] * 7)
    assert times == [0, 0, 0, 60, 60, 60, 120]


def test_tokens_per_window_count_the_real_usage() -> None:
    # Estimated 400 each, really 100: after release, the window holds 100 per call.
    times = grant_times(RateLimits(tokens=1000, window_s=60), [(400, 100)] * 5)
    assert times == [0, 0, 0, 0, 0]
    # Really 700 each: 700 + 400 > 1000, so each call waits for the one before to leave the window.
    assert grant_times(RateLimits(tokens=1000, window_s=60), [(400, 700)] * 3) == [0, 60, 120]


def test_one_oversized_call_is_not_blocked_forever() -> None:
    assert grant_times(RateLimits(tokens=100, window_s=60), [(5000, 5000)]) == [0]


def test_max_in_flight_waits_for_a_release() -> None:
    fake = FakeTime()
    limiter = RateLimiter(RateLimits(max_in_flight=2), clock=fake.clock, sleep=fake.sleep)

    async def go() -> list[str]:
        events: list[str] = []

        async def call(name: str, hold: float) -> None:
            ticket = await limiter.acquire(1)
            events.append(f"start {name}")
            await asyncio.sleep(hold)
            events.append(f"end {name}")
            await limiter.release(ticket, 1)

        await asyncio.gather(call("a", 0.05), call("b", 0.2), call("c", 0.0))
        return events

    events = asyncio.run(go())
    assert events.index("start c") > events.index("end a")  # c waited for a slot


def test_limits_in_the_spec_query() -> None:
    assert split_limits("openai:gpt-4o?rpm=500&tpm=2000&inflight=8") == (
        "openai:gpt-4o",
        RateLimits(requests=500, tokens=2000, max_in_flight=8),
    )
    assert split_limits("local") == ("local", RateLimits())
    assert not isinstance(resolve("scripted:tests.support.replies:always_seven"), LimitedSpec)
    limited = resolve("scripted:tests.support.replies:always_seven?rpm=5")
    assert isinstance(limited, LimitedSpec) and limited.limits.requests == 5


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("local?rps=5", "unknown rate limit 'rps'"),
        ("local?rmp=5", "unknown rate limit 'rmp' in 'local?rmp=5' (did you mean 'rpm'? known: rpm, tpm, inflight)"),
        ("local?rpm=lots", "rate limit rpm='lots' in 'local?rpm=lots' is not a whole number"),
        ("local?rpm", "rate limit rpm='' in 'local?rpm' is not a whole number"),
        ("local?rpm=-1", "is not a whole number"),
        ("local?rpm=1e3", "is not a whole number"),
        ("local?rpm=0", "rate limit rpm must be in [1, 10,000,000] in 'local?rpm=0', got '0'"),
        ("local?inflight=100001", "rate limit inflight must be in [1, 100,000]"),
        ("local?tpm=" + "9" * 5000, "rate limit tpm must be in [1, 1,000,000,000,000] in 'local?tpm=999"),
        ("local?rpm=5&rpm=6", "rate limit rpm is given twice in 'local?rpm=5&rpm=6'"),
    ],
)
def test_bad_limits_are_user_errors(spec: str, message: str) -> None:
    with pytest.raises(UserError) as info:
        resolve(spec)
    assert message in str(info.value) and len(str(info.value)) < 300  # a 5,000-digit value is not echoed whole
