"""The cluster-wide rate limiter: a strict sliding window, checked on a fake clock.

Across two nodes of a Ray cluster: tests/integration/test_ratelimit_on_ray.py.
"""

from __future__ import annotations

import asyncio

import pytest

from redraft.backends._ratelimit import START_WINDOW, LimitedSpec, RateLimiter, RateLimits, _limiter_for, split_limits
from redraft.backends.base import ChatRequest
from redraft.backends.registry import resolve
from redraft.errors import UserError
from redraft.protocols.messages import ChatMessage
from redraft.services import current
from tests.support.fake_llm_servers import FakeLLMServer, Fault


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
        (
            "local?rmp=5",
            "unknown rate limit 'rmp' in 'local?rmp=5' (did you mean 'rpm'? known: rpm, tpm, inflight, adaptive)",
        ),
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


# ------------------------------------------------------------ adaptive concurrency


def adaptive(ceiling: int = 1000) -> tuple[RateLimiter, FakeTime]:
    """An adaptive limiter with a ceiling: asked from the first call (with no limit at all, from the first 429)."""
    fake = FakeTime()
    limits = RateLimits(max_in_flight=ceiling, adaptive=True)
    return RateLimiter(limits, clock=fake.clock, sleep=fake.sleep), fake


def test_the_window_grows_fast_until_a_throttle_then_halves_and_grows_slowly() -> None:
    limiter, _ = adaptive()

    async def go() -> list[float | None]:
        windows = []
        for outcome in ["ok"] * 8 + ["throttled"] + ["ok"] * 8:
            ticket = await limiter.acquire(1)
            await limiter.release(ticket, 1, outcome)  # type: ignore[arg-type]
            windows.append(limiter.state().window)
        return windows

    windows = asyncio.run(go())
    assert windows[:8] == [START_WINDOW + n for n in range(1, 9)]  # slow start: one more per success
    assert windows[8] == (START_WINDOW + 8) / 2  # a throttle halves it
    grown = windows[-1] - windows[8]
    assert 0 < grown < 1  # then one more per window's worth of successes
    assert limiter.state().throttled == 1


def test_a_burst_of_throttles_from_one_window_cuts_once() -> None:
    limiter, _ = adaptive()

    async def go() -> float | None:
        tickets = [await limiter.acquire(1) for _ in range(8)]  # eight calls out, all throttled together
        for ticket in tickets:
            await limiter.release(ticket, 1, "throttled")
        after_burst = limiter.state().window
        ticket = await limiter.acquire(1)  # granted after the cut: its throttle cuts again
        await limiter.release(ticket, 1, "throttled")
        assert limiter.state().window == after_burst / 2
        return after_burst

    assert asyncio.run(go()) == START_WINDOW / 2
    assert limiter.state().throttled == 9


def test_calls_in_flight_wait_for_the_window_and_a_retry_after_holds_every_grant() -> None:
    limiter, fake = adaptive(ceiling=4)
    assert limiter.state().window == 4  # the ceiling, below the start

    async def go() -> list[float]:
        held = [await limiter.acquire(1) for _ in range(4)]
        waiting = asyncio.ensure_future(limiter.acquire(1))
        await asyncio.sleep(0)
        assert not waiting.done()  # the window is full
        await limiter.release(held[0], 1, "throttled", retry_after_s=30.0)  # window 2, and a 30 s hold
        for ticket in held[1:]:
            await limiter.release(ticket, 1, "ok")
        await waiting
        return [fake.now]

    [granted_at] = asyncio.run(go())
    assert granted_at >= 30.0  # not before the server said


def test_a_failure_that_is_not_a_throttle_leaves_the_window_alone() -> None:
    limiter, _ = adaptive()

    async def go() -> None:
        ticket = await limiter.acquire(1)
        await limiter.release(ticket, 1, "failed")

    asyncio.run(go())
    assert limiter.state().window == START_WINDOW and limiter.state().throttled == 0


def test_remote_endpoints_adapt_by_default_and_a_query_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "placeholder")
    spec = resolve("openai:gpt-4o-mini")
    assert isinstance(spec, LimitedSpec) and spec.limits.adaptive is True
    capped = resolve("anthropic:claude-haiku-4-5?inflight=16")
    assert isinstance(capped, LimitedSpec) and capped.limits.adaptive and capped.limits.max_in_flight == 16
    assert not isinstance(resolve("openai:gpt-4o-mini?adaptive=0"), LimitedSpec)
    assert not isinstance(resolve("local"), LimitedSpec)  # the embedded model is not throttled by anyone
    with pytest.raises(UserError, match=r"rate limit adaptive must be in \[0, 1\]"):
        resolve("openai:gpt-4o-mini?adaptive=2")


async def test_each_attempt_of_a_real_call_passes_the_limiter_which_learns_from_a_429() -> None:
    request = ChatRequest(messages=[ChatMessage(role="user", content="2+2?")], max_tokens=8)
    with FakeLLMServer() as server:
        server.script(Fault.rate_limited(retry_after="0.05"))
        spec = resolve(f"openai-compatible:m@{server.openai_base_url}")
        assert isinstance(spec, LimitedSpec)
        completion = await spec.create().complete(request)  # the openai SDK, over HTTP: a 429, then the answer
        assert completion.text == server.reply_text and len(server.requests) == 2
        limiter = _limiter_for(current(), spec.endpoint, spec.limits)
        state = limiter.state()
        assert state.throttled == 1 and state.in_flight == 0
        assert state.window == START_WINDOW + 1  # started by the 429, in slow start; then one success
        assert state.endpoint == spec.endpoint and "127.0.0.1" in state.endpoint


async def test_an_endpoint_is_not_asked_until_throttled_unless_it_has_a_limit() -> None:
    request = ChatRequest(messages=[ChatMessage(role="user", content="hi")], max_tokens=8)
    for model, query, window in (("always_seven", "adaptive=1", None), ("garbage", "adaptive=1&inflight=64", 11)):
        spec = resolve(f"scripted:tests.support.replies:{model}?{query}")  # one endpoint, one limiter, each
        assert isinstance(spec, LimitedSpec)
        backend = spec.create()  # no retry layer: each call is its one attempt
        for _ in range(3):
            await backend.complete(request)
        state = _limiter_for(current(), spec.endpoint, spec.limits).state()
        assert state.window == window and state.in_flight == 0 and state.throttled == 0, query


def test_a_limiter_made_again_adapts_from_the_first_process_that_asks_it() -> None:
    fresh = RateLimiter(RateLimits(adaptive=True))  # no limit given: not adapting until throttled, or asked
    assert fresh.state().window is None

    async def asked_by_a_process_that_was_throttled_before() -> None:
        ticket = await fresh.acquire(1)
        await fresh.release(ticket, 1, "throttled")

    asyncio.run(asked_by_a_process_that_was_throttled_before())
    assert fresh.state().window == START_WINDOW / 2
