"""``azure:DEPLOYMENT`` over real HTTP: Azure's route and header, the openai backend's body, prices by deployment.

The faults every backend shares (retries, timeouts, 429s, refused keys, redaction) are run for ``azure`` too, in
tests/unit/backends/test_http_backends.py; here is what is Azure's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from redraft import RunConfig, Task, refine
from redraft.backends._batch_apis import batchable
from redraft.backends._retrying import RetryPolicy
from redraft.backends.azure import parse_azure
from redraft.backends.openai import OpenAISpec
from redraft.backends.pricing import default_prices
from redraft.backends.registry import resolve
from redraft.engine._answers import critique_json_schema
from redraft.engine.estimate import Estimate
from redraft.errors import UserError
from redraft.protocols.messages import ChatMessage, Usage
from tests.support.fake_llm_servers import AZURE_API_VERSION, FakeLLMServer, sdks_pointed_at

KEY = "azure-test-SECRET-456"
FAST = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02, jitter=False)
PROMPT = [ChatMessage(role="system", content="You are terse."), ChatMessage(role="user", content="What is 2+2?")]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with sdks_pointed_at(monkeypatch, KEY) as fake:
        yield fake


def deployment(name: str) -> OpenAISpec:
    return replace(parse_azure(name), timeout_s=5.0, retry=FAST)


async def test_a_call_goes_to_the_deployments_route_with_the_version_and_the_key_header(server: FakeLLMServer) -> None:
    from redraft.backends.base import ChatRequest

    request = ChatRequest(messages=PROMPT, max_tokens=32, temperature=0.2, seed=7)
    completion = await deployment("gpt-4o-mini-prod").create().complete(request)
    assert completion.text == server.reply_text
    assert (completion.usage.input_tokens, completion.usage.output_tokens, completion.usage.calls) == (11, 7, 1)
    # Azure's reply names the model it serves; the call is the deployment's, as its price is.
    assert (completion.model, completion.finish_reason) == ("gpt-4o-mini-prod", "stop")
    [seen] = server.requests
    assert seen.path == f"/openai/deployments/gpt-4o-mini-prod/chat/completions?api-version={AZURE_API_VERSION}"
    assert seen.headers["api-key"] == KEY and "authorization" not in seen.headers
    assert seen.body["messages"] == [{"role": m.role, "content": m.content} for m in PROMPT]
    assert (seen.body["max_completion_tokens"], seen.body["temperature"], seen.body["seed"]) == (32, 0.2, 7)


async def test_a_critique_asks_for_structured_output_as_openai_does(server: FakeLLMServer) -> None:
    from redraft.backends.base import ChatRequest

    server.reply_text = '{"issues": []}'
    request = ChatRequest(messages=PROMPT, max_tokens=64, json_schema=critique_json_schema())
    await deployment("gpt-4o-mini-prod").create().complete(request)
    [seen] = server.requests
    assert seen.body["response_format"]["type"] == "json_schema"
    assert seen.body["response_format"]["json_schema"]["schema"] == critique_json_schema()


def test_the_spec_names_the_resource_and_registers_like_the_others(server: FakeLLMServer) -> None:
    from_env = resolve("azure:chat-prod")
    inner = from_env.inner  # type: ignore[attr-defined]  # behind the adaptive limiter, as every remote endpoint
    assert isinstance(inner, OpenAISpec) and inner.azure is not None
    assert inner.spec == f"azure:chat-prod@{server.azure_endpoint}" and inner.model == "chat-prod"
    assert inner.azure.api_version == AZURE_API_VERSION and KEY not in repr(inner)
    given = parse_azure("chat-prod@https://example-resource.openai.azure.com/")
    assert given.azure is not None and given.azure.endpoint == "https://example-resource.openai.azure.com"
    assert batchable(inner) is None  # no --batch: Azure's batch API is not OpenAI's


@pytest.mark.parametrize(
    ("unset", "spec", "message"),
    [
        (
            "AZURE_OPENAI_ENDPOINT",
            "azure:chat-prod",
            "azure:chat-prod needs the resource's endpoint: set AZURE_OPENAI_ENDPOINT "
            "(https://RESOURCE.openai.azure.com) or write azure:chat-prod@https://RESOURCE.openai.azure.com",
        ),
        ("OPENAI_API_VERSION", "azure:chat-prod", "azure:chat-prod needs an API version: set OPENAI_API_VERSION"),
        ("AZURE_OPENAI_API_KEY", "azure:chat-prod", "azure:chat-prod needs an API key: set AZURE_OPENAI_API_KEY"),
        (None, "azure:", "the azure backend needs a deployment"),
        (None, "azure:d@ftp://example-resource", "the azure backend's deployment 'd@ftp://example-resource' is not"),
        (None, "azure:d@https://", "the Azure endpoint has no host"),
        (None, "azure:d@https://user:hunter2@example-resource", "put the key in AZURE_OPENAI_API_KEY"),
    ],
)
def test_what_is_missing_is_one_line_naming_its_variable(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, unset: str | None, spec: str, message: str
) -> None:
    if unset is not None:
        monkeypatch.delenv(unset)
    with pytest.raises(UserError) as caught:
        resolve(spec)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_an_endpoint_from_the_environment_must_be_a_url(server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "example-resource.openai.azure.com")
    with pytest.raises(UserError, match=r"^the Azure endpoint must start with https://, got 'example-resource"):
        resolve("azure:chat-prod")


def test_a_key_missing_where_the_calls_run_is_named_there(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = parse_azure("chat-prod")
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    with pytest.raises(UserError, match=r"^azure:chat-prod@\S+ needs AZURE_OPENAI_API_KEY set where the model calls"):
        parsed.create()


def test_a_deployment_named_after_its_model_is_priced_and_another_needs_a_prices_entry(
    server: FakeLLMServer, tmp_path: Path
) -> None:
    """A task refined over HTTP: its cost is the deployment's tokens at its price, in the estimate's name too."""
    server.reply_text = "3 + 4 = 7\nAnswer: 7"
    task = Task(task_id="t", scenario="arithmetic", prompt="Mia has 3 apples and gets 4 more. How many?")
    usage = Usage(input_tokens=server.input_tokens, output_tokens=server.output_tokens, cached_tokens=3, calls=1)

    def refined(spec: str, **settings: object) -> tuple[float, list[str]]:
        config = RunConfig.build(drafter=spec, critic=spec, samples=1, max_rounds=1, cache=False, **settings)
        result = refine(task, config).result
        assert result.usage.calls == 1 and result.text == server.reply_text
        return result.usage.cost_usd, result.unpriced_models

    expected = default_prices().cost("gpt-4o-mini", usage)
    assert expected is not None and expected > 0
    assert refined("azure:gpt-4o-mini-prod") == (pytest.approx(expected), [])  # by the built-in table's prefix
    assert refined("azure:prod-chat") == (0.0, ["prod-chat"])  # unpriced: 0 USD, named, no USD budget stops it
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"prod-chat": {"input": 1.0, "output": 2.0}}))
    assert refined("azure:prod-chat", prices=str(prices)) == (pytest.approx((11 * 1.0 + 7 * 2.0) / 1e6), [])
    assert all(r.path.startswith("/openai/deployments/") for r in server.requests)


def test_the_estimate_prices_a_deployment_by_the_same_name(server: FakeLLMServer) -> None:
    from redraft import estimate

    def made(spec: str) -> Estimate:
        return estimate(RunConfig.build(scenario="arithmetic", limit=2, drafter=spec, critic=spec, samples=1))

    assert made("azure:gpt-4o-mini-prod").unpriced == ()
    assert made("azure:prod-chat").unpriced == ("prod-chat",)
    assert server.requests == []  # an estimate calls nothing
