"""LangChain's ``ChatOpenAI`` pointed at redraft serve (the app on a real socket in this process), unchanged but
for its base URL: ``invoke``, ``ainvoke`` and ``stream`` get the refined answer, with every internal call's tokens
in its usage. The model behind the server is the suite's fake OpenAI-compatible server, over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from redraft.serving import ServeSettings, Serving
from tests.support.fake_llm_servers import FakeLLMServer
from tests.support.serving import served

ANSWER = "Rain taps the window, soft and slow."
ASK = [SystemMessage("You write haiku."), HumanMessage("Write a haiku about rain.")]


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        server.reply_text = ANSWER
        yield server


@pytest.fixture
def app(fake: FakeLLMServer, tmp_path: Path) -> Iterator[Serving]:
    model = f"openai-compatible:{fake.model}@{fake.openai_base_url}"
    with served(ServeSettings(run={"model": model, "samples": 1, "cache": False}, out=str(tmp_path))) as serving:
        yield serving


def chat(app: Serving, model: str = "redraft/none", **more: object) -> ChatOpenAI:
    return ChatOpenAI(base_url=app.base_url, api_key="unused", model=model, max_retries=0, **more)  # type: ignore[arg-type]


def test_invoke_gets_the_refined_answer_with_every_internal_call_in_its_usage(
    app: Serving, fake: FakeLLMServer
) -> None:
    answer = chat(app).invoke(ASK)
    assert isinstance(answer, AIMessage) and answer.content == ANSWER
    assert answer.usage_metadata is not None
    assert answer.usage_metadata["input_tokens"] == fake.input_tokens * len(fake.requests) == 11
    sent = fake.requests[0].body["messages"]
    assert "Write a haiku about rain." in str(sent)  # the conversation reached the model as the task's prompt


def test_ainvoke_runs_a_loop_per_call_concurrently(app: Serving, fake: FakeLLMServer) -> None:
    async def both() -> list[AIMessage]:
        model = chat(app, "redraft/best_of_n", extra_body={"redraft": {"samples": 2}})
        return list(await asyncio.gather(model.ainvoke(ASK), model.ainvoke("And a haiku about snow.")))

    answers = asyncio.run(both())
    assert [a.content for a in answers] == [ANSWER, ANSWER]
    assert len(fake.requests) == 4 and app.state.metrics.requests == {200: 2}  # two samples drafted for each


def test_stream_yields_the_answer_in_chunks(app: Serving) -> None:
    chunks = list(chat(app, stream_usage=True).stream(ASK))
    text = "".join(str(c.content) for c in chunks)
    assert text == ANSWER and len([c for c in chunks if c.content]) >= 1
    usage = [c.usage_metadata for c in chunks if c.usage_metadata]
    assert usage and usage[-1]["input_tokens"] == 11


def test_a_model_the_server_does_not_serve_is_langchain_s_not_found_error(app: Serving) -> None:
    import openai

    with pytest.raises(openai.NotFoundError, match="redraft/STRATEGY"):
        chat(app, "gpt-4o").invoke(ASK)
