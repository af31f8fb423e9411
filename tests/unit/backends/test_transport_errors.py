"""A call that got no HTTP answer says why, and what to do: refused, unknown host, TLS, timeout; and the HTTP
errors a newcomer meets first (401, 404) name what to check. Each for real, over sockets on this machine,
through each backend: the openai SDK, redraft's own aiohttp client (openai-compatible), the anthropic SDK.

The SDKs' transport reports a refused connection, an unknown host and a failed TLS handshake alike as a
connect *timeout*: a connection refused once read "no reply within 60s (gave up after 5 attempts)".
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import replace

import pytest

from redraft.backends._retrying import RetryPolicy
from redraft.backends.anthropic import parse_anthropic
from redraft.backends.base import Backend, ChatRequest
from redraft.backends.openai import parse_openai, parse_openai_compatible
from redraft.errors import AuthenticationError, BackendUnavailableError, PermanentBackendError
from redraft.protocols.messages import ChatMessage
from tests.support.fake_llm_servers import FakeLLMServer, Fault, sdks_pointed_at

KEY = "sk-test-SECRET-456"
ONCE = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.01, jitter=False)
REQUEST = ChatRequest(messages=[ChatMessage(role="user", content="What is 2+2?")], max_tokens=8, seed=1)
KINDS = ["openai", "openai-compatible", "anthropic"]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with sdks_pointed_at(monkeypatch, KEY) as fake:
        yield fake


def backend(kind: str, base_url: str, monkeypatch: pytest.MonkeyPatch, timeout_s: float = 5.0) -> Backend:
    """``kind``'s backend at ``base_url`` (an OpenAI-style one ending in /v1)."""
    if kind == "openai":
        spec = replace(parse_openai("gpt-test"), base_url=base_url)
    elif kind == "openai-compatible":
        spec = parse_openai_compatible(f"local-model@{base_url}")
    else:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", base_url.removesuffix("/v1"))
        spec = parse_anthropic("claude-test")  # type: ignore[assignment]
    return replace(spec, timeout_s=timeout_s, retry=ONCE).create()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def failure(made: Backend) -> str:
    with pytest.raises(BackendUnavailableError) as caught:
        await made.complete(REQUEST)
    message = str(caught.value)
    assert "\n" not in message and KEY not in message and message.endswith("(gave up after 2 attempts)")
    return message


@pytest.mark.parametrize("kind", KINDS)
async def test_a_refused_connection_says_refused_and_where(
    server: FakeLLMServer, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    message = await failure(backend(kind, f"http://127.0.0.1:{port}/v1", monkeypatch))
    assert f"connection refused by 127.0.0.1:{port}: is its server running" in message
    assert "no reply within" not in message


@pytest.mark.parametrize("kind", KINDS)
async def test_an_unknown_host_says_it_cannot_be_resolved(
    server: FakeLLMServer, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = await failure(backend(kind, "http://no-such-host.invalid/v1", monkeypatch))
    assert "cannot resolve the host of no-such-host.invalid" in message


@pytest.mark.parametrize("kind", KINDS)
async def test_https_to_a_plain_http_server_says_tls(
    server: FakeLLMServer, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = server.openai_base_url.replace("http://", "https://")
    message = await failure(backend(kind, plain, monkeypatch))
    assert "TLS with 127.0.0.1:" in message and "an http:// server addressed as https://" in message


@pytest.mark.parametrize("kind", KINDS)
async def test_a_server_that_never_answers_is_a_timeout(
    server: FakeLLMServer, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.script(Fault.slow(10.0), Fault.slow(10.0))
    base = server.openai_base_url if kind != "anthropic" else server.anthropic_base_url + "/v1"
    message = await failure(backend(kind, base, monkeypatch, timeout_s=0.3))
    assert "no reply within 0.3s: the server is slow or overloaded" in message


@pytest.mark.parametrize("kind", KINDS)
async def test_an_unknown_model_names_what_to_check(
    server: FakeLLMServer, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.script(Fault("status", 404, "The model `gpt-test` does not exist"))
    base = server.openai_base_url if kind != "anthropic" else server.anthropic_base_url + "/v1"
    with pytest.raises(PermanentBackendError) as caught:
        await backend(kind, base, monkeypatch).complete(REQUEST)
    assert "HTTP 404: The model `gpt-test` does not exist; check the model's name" in str(caught.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_a_refused_key_names_the_variable_to_check(
    server: FakeLLMServer, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.script(Fault("status", 401, "bad key"))
    base = server.openai_base_url if kind != "anthropic" else server.anthropic_base_url + "/v1"
    with pytest.raises(AuthenticationError, match=r"refused \(HTTP 401\); check (OPENAI|ANTHROPIC)_API_KEY"):
        await backend(kind, base, monkeypatch).complete(REQUEST)
