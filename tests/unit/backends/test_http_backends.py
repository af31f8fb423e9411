"""The openai, openai-compatible, azure and anthropic backends over real HTTP, and the retry layer.

Every backend test talks to `FakeLLMServer` on 127.0.0.1 through the real SDKs,
so what is asserted is what went over the wire: how many requests were made
(the SDKs' own retries must be off), what they carried, and which redraft
error each fault became. No Ray, no network, no real key.
"""

from __future__ import annotations

import datetime
import json
import os
import pickle
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from typing import Any

import msgspec
import pytest

from redraft.backends._ratelimit import START_WINDOW, LimitedSpec, RateLimits, _limiter_for
from redraft.backends._retrying import RetryPolicy, retry_after_s, with_retries
from redraft.backends.anthropic import AnthropicSpec, parse_anthropic
from redraft.backends.azure import parse_azure
from redraft.backends.base import Backend, BackendSpec, ChatRequest
from redraft.backends.openai import OpenAISpec, parse_openai, parse_openai_compatible
from redraft.backends.registry import resolve
from redraft.engine._answers import critique_json_schema, parse_report, plan_json_schema
from redraft.errors import AuthenticationError, PermanentBackendError, RetryableBackendError, UserError
from redraft.protocols.messages import ChatMessage
from redraft.services import current
from tests.support.fake_llm_servers import FakeLLMServer, Fault, sdks_pointed_at

KEY = "sk-test-SECRET-123"
FAST = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.02, jitter=False)
CRITIQUE = '{"issues": [{"severity": "major", "quote": "2+2=5", "reason": "arithmetic", "fix": "2+2=4"}]}'
KINDS = ["openai", "openai-compatible", "azure", "anthropic"]
"""OpenAI through the openai SDK, a compatible server through redraft's own aiohttp client, an Azure OpenAI
deployment through the openai SDK's Azure client (Azure's own route on the fake), Anthropic through the
anthropic SDK."""

REQUEST = ChatRequest(
    messages=[
        ChatMessage(role="system", content="You are terse."),
        ChatMessage(role="user", content="What is 2+2?"),
    ],
    max_tokens=32,
    temperature=0.2,
    seed=7,
    stop=["\n\n"],
)
STRUCTURED = ChatRequest(messages=REQUEST.messages, max_tokens=64, json_schema=critique_json_schema())


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with sdks_pointed_at(monkeypatch, KEY) as fake:
        yield fake


def openai_spec(**changes: Any) -> OpenAISpec:
    return replace(parse_openai("gpt-test"), **{"timeout_s": 5.0, "retry": FAST, **changes})


def anthropic_spec(**changes: Any) -> AnthropicSpec:
    return replace(parse_anthropic("claude-test"), **{"timeout_s": 5.0, "retry": FAST, **changes})


def compatible_spec(base_url: str | None = None, **changes: Any) -> OpenAISpec:
    """A compatible server at ``base_url``, by default the fake's address (the `server` fixture's
    ``OPENAI_BASE_URL``, which the compatible backend itself never reads: its URL is in its spec)."""
    spec = parse_openai_compatible(f"local-model@{base_url or os.environ['OPENAI_BASE_URL']}")
    return replace(spec, **{"timeout_s": 5.0, "retry": FAST, **changes})


def azure_spec(**changes: Any) -> OpenAISpec:
    """The deployment ``gpt-4o-mini-prod`` at the fake's address (the `server` fixture's ``AZURE_OPENAI_ENDPOINT``)."""
    return replace(parse_azure("gpt-4o-mini-prod"), **{"timeout_s": 5.0, "retry": FAST, **changes})


SPECS: dict[str, Callable[..., BackendSpec]] = {
    "openai": openai_spec,
    "openai-compatible": compatible_spec,
    "azure": azure_spec,
    "anthropic": anthropic_spec,
}


def make(kind: str, **changes: Any) -> Backend:
    return SPECS[kind](**changes).create()


# ---------------------------------------------------------------- normal replies


async def test_openai_completion_reports_what_the_server_sent(server: FakeLLMServer) -> None:
    completion = await make("openai").complete(REQUEST)

    assert completion.text == server.reply_text
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (11, 7)
    assert (completion.usage.cached_tokens, completion.usage.calls) == (3, 1)
    assert (completion.model, completion.finish_reason) == ("fake-model-1", "stop")
    assert completion.latency_s > 0
    [seen] = server.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.body["model"] == "gpt-test"
    assert seen.body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2+2?"},
    ]
    assert seen.body["max_completion_tokens"] == 32 and "max_tokens" not in seen.body
    assert (seen.body["temperature"], seen.body["seed"], seen.body["stop"]) == (0.2, 7, ["\n\n"])
    assert "response_format" not in seen.body


async def test_anthropic_completion_reports_what_the_server_sent(server: FakeLLMServer) -> None:
    completion = await make("anthropic").complete(REQUEST)

    assert completion.text == server.reply_text
    # Anthropic counts cache reads (3) and writes (2) apart from input_tokens (11);
    # redraft's input_tokens holds all three, so cached_tokens is a part of it.
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (16, 7)
    assert (completion.usage.cached_tokens, completion.usage.calls) == (3, 1)
    assert (completion.model, completion.finish_reason) == ("fake-model-1", "end_turn")
    [seen] = server.requests
    assert seen.path == "/v1/messages"
    assert seen.headers["authorization"] == f"Bearer {KEY}"  # anthropic 2.x no longer sends x-api-key
    assert seen.body["system"] == "You are terse."
    assert seen.body["messages"] == [{"role": "user", "content": "What is 2+2?"}]
    assert (seen.body["max_tokens"], seen.body["stop_sequences"]) == (32, ["\n\n"])
    # Anthropic has no seed, and its API version 2026-10-21 refuses sampling parameters.
    assert "seed" not in seen.body and "temperature" not in seen.body and "tools" not in seen.body


def inner(spec: BackendSpec) -> BackendSpec:
    """The endpoint's own spec, through the adaptive limiter every remote endpoint is behind by default."""
    assert isinstance(spec, LimitedSpec) and spec.limits.adaptive
    return spec.inner


async def test_backends_register_through_entry_points(server: FakeLLMServer) -> None:
    assert isinstance(inner(resolve("openai:gpt-test")), OpenAISpec)
    assert isinstance(inner(resolve("anthropic:claude-test")), AnthropicSpec)
    compatible = inner(resolve(f"openai-compatible:org/model@v2@{server.openai_base_url}"))
    assert isinstance(compatible, OpenAISpec)
    assert (compatible.model, compatible.base_url) == ("org/model@v2", server.openai_base_url)
    assert compatible.spec == f"openai-compatible:org/model@v2@{server.openai_base_url}"


# ---------------------------------------------------------------- retried faults

RETRYABLE_FAULTS = {
    "429": Fault.rate_limited(retry_after="0.05"),
    "500": Fault.server_error(500),
    "503": Fault.server_error(503),
    "529": Fault.overloaded(),
    "malformed-json": Fault.malformed(),
    "dropped-connection": Fault.dropped(),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fault", RETRYABLE_FAULTS.values(), ids=RETRYABLE_FAULTS.keys())
async def test_a_retryable_fault_costs_exactly_one_more_request(server: FakeLLMServer, kind: str, fault: Fault) -> None:
    server.script(fault)
    completion = await make(kind).complete(REQUEST)
    assert completion.text == server.reply_text
    assert len(server.requests) == 2


@pytest.mark.parametrize("kind", KINDS)
async def test_a_reply_slower_than_the_timeout_is_retried(server: FakeLLMServer, kind: str) -> None:
    server.script(Fault.slow(5.0))
    completion = await make(kind, timeout_s=0.5).complete(REQUEST)
    assert completion.text == server.reply_text
    assert len(server.requests) == 2


@pytest.mark.parametrize("kind", KINDS)
async def test_several_faults_in_a_row_are_each_retried_once(server: FakeLLMServer, kind: str) -> None:
    server.script(Fault.server_error(502), Fault.dropped(), Fault.malformed())
    await make(kind).complete(REQUEST)
    assert len(server.requests) == 4


@pytest.mark.parametrize("kind", KINDS)
async def test_retries_stop_after_max_attempts_without_a_storm(server: FakeLLMServer, kind: str) -> None:
    server.script(*[Fault.server_error(500)] * 10)
    with pytest.raises(RetryableBackendError, match="gave up after 4 attempts") as caught:
        await make(kind).complete(REQUEST)
    assert caught.value.status == 500
    assert len(server.requests) == 4  # FAST.max_attempts, and not a request more: the SDK does not retry


@pytest.mark.parametrize("kind", KINDS)
async def test_retry_after_is_honoured(server: FakeLLMServer, kind: str) -> None:
    server.script(Fault.rate_limited(retry_after="1"))
    await make(kind).complete(REQUEST)  # FAST's own backoff is 0.01 s
    first, second = server.requests
    assert second.arrived - first.arrived >= 1.0


@pytest.mark.parametrize("kind", KINDS)
async def test_a_429_with_only_the_providers_rate_limit_headers_waits_for_the_reset(
    server: FakeLLMServer, kind: str
) -> None:
    exhausted = (
        {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"}
        if kind != "anthropic"
        else {"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": _in_seconds(1.2)}
    )
    server.script(Fault("status", 429, "rate limit reached", exhausted))
    await make(kind).complete(REQUEST)
    first, second = server.requests
    assert second.arrived - first.arrived >= 0.95


def _in_seconds(seconds: float) -> str:
    return (datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)).isoformat()


# ---------------------------------------------------------------- errors not retried


@pytest.mark.parametrize("kind", KINDS)
async def test_bad_request_is_permanent_with_the_servers_message(server: FakeLLMServer, kind: str) -> None:
    server.script(Fault.bad_request("max_tokens: must be positive"))
    with pytest.raises(PermanentBackendError, match="HTTP 400: max_tokens: must be positive"):
        await make(kind).complete(REQUEST)
    assert len(server.requests) == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_refused_key_is_an_authentication_error_that_hides_the_key(server: FakeLLMServer, kind: str) -> None:
    server.script(Fault("status", 401, f"Incorrect API key provided: {KEY}"))
    backend = make(kind)
    with pytest.raises(AuthenticationError) as caught:
        await backend.complete(REQUEST)
    message = str(caught.value)
    assert KEY not in message and "SECRET" not in message
    assert message.startswith(f"{kind}:") and "\n" not in message
    assert len(server.requests) == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_a_key_echoed_by_the_server_is_redacted(server: FakeLLMServer, kind: str) -> None:
    server.script(Fault.bad_request(f"header was Bearer {KEY}"), *[Fault.server_error(500)] * 4)
    backend = make(kind)
    with pytest.raises(PermanentBackendError) as permanent:
        await backend.complete(REQUEST)
    with pytest.raises(RetryableBackendError) as retryable:
        await backend.complete(REQUEST)
    for error in (permanent.value, retryable.value):
        assert KEY not in str(error) and KEY not in repr(error)
        assert KEY.encode() not in pickle.dumps(error)
    assert "[redacted]" in str(permanent.value)


def test_specs_hold_no_key(server: FakeLLMServer) -> None:
    specs = [parse_openai("gpt-test"), parse_anthropic("claude-test"), openai_spec(), anthropic_spec()]
    specs += [parse_openai_compatible(f"m@{server.openai_base_url}"), parse_azure("d"), azure_spec()]
    for spec in specs:
        assert KEY not in repr(spec) and KEY not in spec.spec
        assert KEY.encode() not in pickle.dumps(spec)


# ---------------------------------------------------------------- structured critiques


async def test_openai_structured_request_uses_response_format(server: FakeLLMServer) -> None:
    server.reply_text = CRITIQUE
    completion = await make("openai").complete(STRUCTURED)
    assert parse_report(completion.text).issues[0].fix == "2+2=4"
    [seen] = server.requests
    assert seen.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "critique", "schema": critique_json_schema(), "strict": False},
    }


async def test_anthropic_structured_request_forces_the_critique_tool(server: FakeLLMServer) -> None:
    server.reply_text = CRITIQUE
    completion = await make("anthropic").complete(STRUCTURED)
    assert parse_report(completion.text).issues[0].severity == "major"
    assert completion.finish_reason == "tool_use"
    [seen] = server.requests
    [tool] = seen.body["tools"]
    assert (tool["name"], tool["input_schema"]) == ("report_critique", critique_json_schema())
    assert seen.body["tool_choice"] == {"type": "tool", "name": "report_critique"}


async def test_a_titled_schema_names_the_structured_answer_after_its_title(server: FakeLLMServer) -> None:
    """A plan's schema is sent as a response format named ``plan`` and as a forced tool ``report_plan``."""
    plan = {"steps": [{"intent": "read", "inputs": [], "output": "a.csv", "columns": ["x"], "types": {}}]}
    server.reply_text = json.dumps(plan)
    request = msgspec.structs.replace(STRUCTURED, json_schema=plan_json_schema("plan"))
    completion = await make("openai").complete(request)
    assert json.loads(completion.text) == plan
    await make("anthropic").complete(request)
    sent_openai, sent_anthropic = server.requests
    assert sent_openai.body["response_format"]["json_schema"]["name"] == "plan"
    [tool] = sent_anthropic.body["tools"]
    assert tool["name"] == "report_plan" and sent_anthropic.body["tool_choice"]["name"] == "report_plan"


async def test_openai_compatible_falls_back_step_by_step_when_response_format_is_refused(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    server.reply_text = CRITIQUE
    server.reject_response_format = True
    spec = compatible_spec(server.openai_base_url)
    backend = spec.create()

    first = await backend.complete(STRUCTURED)
    refused_schema, refused_object, fallback = server.requests
    assert refused_schema.body["response_format"]["type"] == "json_schema"
    # llama.cpp's and vLLM's form: json_object with the schema (a grammar server-side)
    assert refused_object.body["response_format"] == {"type": "json_object", "schema": critique_json_schema()}
    assert "response_format" not in fallback.body
    assert fallback.headers["authorization"] == "Bearer not-needed"
    assert fallback.body["max_tokens"] == 64 and "max_completion_tokens" not in fallback.body
    system = fallback.body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are terse.")
    assert '"issues"' in system["content"]  # the schema, written into the one system message
    assert [m["role"] for m in fallback.body["messages"]] == ["system", "user"]

    second = await backend.complete(STRUCTURED)  # remembered: straight to the fallback
    assert len(server.requests) == 4 and "response_format" not in server.requests[3].body
    for completion in (first, second):
        assert parse_report(completion.text).issues[0].quote == "2+2=5"


async def test_openai_requests_go_over_the_wire_as_the_typed_sdk_call_would_send_them(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both backends build their body themselves: OpenAI's goes out through the SDK's ``post``, skipping
    `chat.completions.create`'s walk of it against the SDK's parameter types, and a compatible server's over
    redraft's own aiohttp client. Every form they send (plain, each structured form, OpenAI's and a compatible
    server's token limit) must be the body the typed call sends; OpenAI's request must carry the SDK's headers
    too, and a compatible server's a JSON body with the bearer key."""
    import openai

    server.reply_text = CRITIQUE
    await make("openai").complete(msgspec.structs.replace(REQUEST, stable_chars=4, cache_key="redraft-task"))
    assert server.requests[0].body["prompt_cache_key"] == "redraft-task"  # the SDK's own parameter
    monkeypatch.delenv("OPENAI_BASE_URL")
    server.reject_response_format = True  # json_schema, then json_object refused: all three forms sent
    compatible = compatible_spec(server.openai_base_url)
    await compatible.create().complete(STRUCTURED)
    await compatible.create().complete(REQUEST)
    posted = list(server.requests)
    assert len(posted) == 5 and {"max_tokens", "max_completion_tokens"} <= {k for r in posted for k in r.body}

    server.reject_response_format = False
    async with openai.AsyncOpenAI(api_key=KEY, base_url=server.openai_base_url, max_retries=0) as sdk:
        for request in posted:
            await sdk.chat.completions.create(**request.body)
    typed = server.requests[len(posted) :]
    assert [r.body for r in typed] == [r.body for r in posted]
    varying = {"idempotency-key", "authorization", "user-agent", "x-stainless-async", "content-length"}
    assert {k for k in posted[0].headers if k not in varying} == {k for k in typed[0].headers if k not in varying}
    for ours in posted:
        assert ours.headers["content-type"] == "application/json"
        assert ours.headers["authorization"] == f"Bearer {KEY}"


async def test_openai_proper_does_not_fall_back(server: FakeLLMServer) -> None:
    server.reject_response_format = True
    with pytest.raises(PermanentBackendError, match="response_format"):
        await make("openai").complete(STRUCTURED)
    assert len(server.requests) == 1


# ---------------------------------------------------------------- spec parsing


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("openai:", "needs a model"),
        ("anthropic:", "needs a model"),
        ("openai-compatible:model", "needs a server URL"),
        ("openai-compatible:model@127.0.0.1:8000/v1", "must start with http"),
        ("openai-compatible:model@ftp://host/v1", "must start with http"),
        ("openai-compatible:@http://127.0.0.1:8000/v1", "needs a model name"),
        ("openai-compatible:model@http://", "has no host"),
    ],
)
def test_bad_specs_are_user_errors(server: FakeLLMServer, spec: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        resolve(spec)


def test_credentials_in_the_url_are_refused_without_echoing_them(server: FakeLLMServer) -> None:
    with pytest.raises(UserError, match="OPENAI_API_KEY") as caught:
        resolve("openai-compatible:m@http://user:hunter2@127.0.0.1:8000/v1")
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "variable"), [("openai:gpt-test", "OPENAI_API_KEY"), ("anthropic:c", "ANTHROPIC_API_KEY")]
)
def test_a_missing_key_fails_at_parse_time_and_in_the_actor(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, spec: str, variable: str
) -> None:
    parsed = resolve(spec)
    monkeypatch.delenv(variable)
    with pytest.raises(UserError, match=f"set {variable}"):
        resolve(spec)
    with pytest.raises(UserError, match=variable):
        parsed.create()


# ---------------------------------------------------------------- the retry layer


class Flaky:
    """Raises the given errors in turn, then returns "ok"; counts calls."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def recorder() -> tuple[list[float], Callable[[float], Awaitable[None]]]:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    return waits, sleep


def failures(n: int, retry_after_s: float | None = None) -> list[Exception]:
    return [RetryableBackendError("busy", status=503, retry_after_s=retry_after_s) for _ in range(n)]


async def test_backoff_doubles_up_to_the_cap() -> None:
    waits, sleep = recorder()
    policy = RetryPolicy(max_attempts=6, base_delay_s=0.5, max_delay_s=3.0, jitter=False)
    call = Flaky(*failures(5))
    assert await with_retries(call, policy=policy, sleep=sleep) == "ok"
    assert waits == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert call.calls == 6


async def test_full_jitter_stays_under_the_backoff_and_replays_with_the_same_seed() -> None:
    policy = RetryPolicy(max_attempts=5, base_delay_s=1.0, max_delay_s=4.0)
    runs = []
    for _ in range(2):
        waits, sleep = recorder()
        await with_retries(Flaky(*failures(4)), policy=policy, sleep=sleep, rng=random.Random(42))
        runs.append(waits)
    assert runs[0] == runs[1]
    assert all(0 <= wait <= bound for wait, bound in zip(runs[0], [1.0, 2.0, 4.0, 4.0], strict=True))


async def test_retry_after_is_a_floor_up_to_its_cap() -> None:
    waits, sleep = recorder()
    policy = RetryPolicy(base_delay_s=0.1, max_retry_after_s=60.0, jitter=False)
    errors = failures(1, retry_after_s=7.0) + failures(1, retry_after_s=3600.0) + failures(1, retry_after_s=0.0)
    await with_retries(Flaky(*errors), policy=policy, sleep=sleep)
    assert waits == [7.0, 60.0, 0.4]


async def test_attempts_run_out_with_the_last_error() -> None:
    waits, sleep = recorder()
    call = Flaky(*failures(3))
    with pytest.raises(RetryableBackendError, match="busy \\(gave up after 3 attempts\\)") as caught:
        await with_retries(call, policy=RetryPolicy(max_attempts=3), sleep=sleep)
    assert caught.value.status == 503
    assert call.calls == 3 and len(waits) == 2


@pytest.mark.parametrize("error", [PermanentBackendError("bad"), AuthenticationError("no"), ValueError("bug")])
async def test_other_errors_are_not_retried(error: Exception) -> None:
    waits, sleep = recorder()
    call = Flaky(error)
    with pytest.raises(type(error)):
        await with_retries(call, policy=RetryPolicy(), sleep=sleep)
    assert call.calls == 1 and waits == []


def test_retry_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="negative"):
        RetryPolicy(base_delay_s=-1)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, 30.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),
        # No Retry-After: the reset of each exhausted provider limit, the longest.
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s"}, 360.0),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1h2m3.5s"}, 3723.5),
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "20ms"}, 0.02),
        ({"x-ratelimit-remaining-tokens": "12", "x-ratelimit-reset-tokens": "20s"}, None),  # not exhausted
        (
            {
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "1s",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "7s",
            },
            7.0,
        ),
        (
            {
                "anthropic-ratelimit-requests-remaining": "0",
                "anthropic-ratelimit-requests-reset": "2015-10-21T07:28:45Z",
            },
            45.0,
        ),
        ({"anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-tokens-reset": "yesterday"}, None),
        ({"retry-after": "2", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "9s"}, 2.0),
    ],
)
def test_retry_after_header_parsing(headers: dict[str, str], expected: float | None) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert retry_after_s(headers, now=lambda: now) == expected


# ---------------------------------------------------------------- the endpoint's limiter


@pytest.mark.parametrize("kind", KINDS)
async def test_every_sdk_reports_a_429_to_the_endpoints_limiter_and_retries(server: FakeLLMServer, kind: str) -> None:
    endpoint = f"{kind}-limited-{server.url}"  # a limiter of its own
    limited = LimitedSpec(SPECS[kind](), RateLimits(adaptive=True), endpoint=endpoint)
    server.script(Fault.rate_limited(retry_after="0.01"), Fault.overloaded())
    completion = await limited.create().complete(REQUEST)
    assert completion.text == server.reply_text and len(server.requests) == 3
    state = _limiter_for(current(), endpoint, limited.limits).state()
    assert state.throttled == 2 and state.in_flight == 0  # the 429 started it; the 529 went through it
    assert state.window == START_WINDOW / 2 + 1 / (START_WINDOW / 2)  # halved by the 529, then one success
