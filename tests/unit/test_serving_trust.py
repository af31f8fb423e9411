"""What a request may make the server do with the operator's keys and money, on a real socket: a model a request
names carries no endpoint, reaches only an https endpoint of the server's own configuration, and has a price when
the server's budget is in money. Each refused request is watched by a real listener on 127.0.0.1, which must see
no connection and no byte; a malformed body is a 400 in OpenAI's shape, never a 500."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from redraft.errors import UserError
from redraft.serving import ServeSettings, make_app
from tests.support.fake_llm_servers import FakeLLMServer, sdks_pointed_at
from tests.support.serving import SCRIPTED, served

ASK = [{"role": "user", "content": "What is 6 times 7?"}]
KEY = "sk-operator-" + "o" * 24


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts and the bytes they send."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = int(self._sock.getsockname()[1])
        self.connections = 0
        self.received = b""
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.settimeout(2)
            try:
                while part := conn.recv(65536):
                    self.received += part
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    watched = Listener()
    with socket.create_connection(("127.0.0.1", watched.port)) as probe:  # it does see what reaches it
        probe.sendall(b"x")
    while not watched.received:
        threading.Event().wait(0.01)
    watched.connections, watched.received = 0, b""
    yield watched
    watched.close()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    """The providers' SDKs pointed at a fake server over plain http, with the operator's keys set."""
    with sdks_pointed_at(monkeypatch, KEY) as server:
        server.reply_text = "Answer: 42"
        yield server


def settings(tmp_path: Path, **more: Any) -> ServeSettings:
    run = {"model": SCRIPTED, "samples": 1, "max_rounds": 2} | more.pop("run", {})
    return ServeSettings(run=run, out=str(tmp_path), **more)


def ask(base_url: str, model: str, **redraft: Any) -> httpx.Response:
    body = {"model": model, "messages": ASK, "redraft": redraft}
    return httpx.post(f"{base_url}/chat/completions", json=body, timeout=120)


def refused(answer: httpx.Response, param: str) -> str:
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert error["param"] == param
    return str(error["message"])


def test_a_request_naming_an_endpoint_for_the_server_s_key_is_refused_and_nothing_reaches_it(
    fake: FakeLLMServer, listener: Listener, tmp_path: Path
) -> None:
    there = f"http://127.0.0.1:{listener.port}"
    with served(settings(tmp_path)) as app:
        as_model = ask(app.base_url, f"redraft/none/azure:chat@{there}")
        as_critic = ask(app.base_url, "redraft/adversarial", critic=f"azure:chat@{there}")
        over_https = ask(app.base_url, "redraft/none", critic=f"azure:chat@https://127.0.0.1:{listener.port}")
        limits = ask(app.base_url, "redraft/none/openai:gpt-4o-mini?inflight=1000")
        compatible = ask(app.base_url, f"redraft/none/openai-compatible:m@{there}/v1")
    assert "by its name alone" in refused(as_model, "model")
    assert "by its name alone" in refused(as_critic, "redraft.critic")
    assert "by its name alone" in refused(over_https, "redraft.critic")
    assert "by its name alone" in refused(limits, "model")
    assert "may name a model of" in refused(compatible, "model")
    assert (listener.connections, listener.received) == (0, b"")
    assert not fake.requests


def test_the_server_s_key_goes_only_to_its_own_endpoint_and_a_request_named_model_only_over_https(
    fake: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with served(settings(tmp_path, run={"model": "azure:chat"})) as app:  # the operator's own, over http
        own = ask(app.base_url, "redraft/none")
        seen = len(fake.requests)
        other = ask(app.base_url, "redraft/none/azure:other-deployment")
        openai_model = ask(app.base_url, "redraft/none", critic="openai:gpt-4o-mini")
    assert own.status_code == 200, own.text
    assert seen == 1 and fake.requests[0].headers["api-key"] == KEY  # the listener does see a key that is sent
    assert "not https" in refused(other, "model")
    assert "not https" in refused(openai_model, "redraft.critic")
    assert len(fake.requests) == seen


def test_with_a_money_budget_a_request_named_model_with_no_price_is_refused(
    fake: FakeLLMServer, listener: Listener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"https://127.0.0.1:{listener.port}/v1")
    with served(settings(tmp_path, usd_per_period=1.0)) as app:
        unpriced = ask(app.base_url, "redraft/none/openai:my-unlisted-model")
        critic = ask(app.base_url, "redraft/self_refine", critic="openai:my-unlisted-model")
    assert "no price for my-unlisted-model" in refused(unpriced, "model")
    assert unpriced.json()["error"]["code"] == "model_not_priced"
    assert "no price" in refused(critic, "redraft.critic")
    assert listener.connections == 0 and listener.received == b""
    with served(settings(tmp_path)) as app:
        bounded_by_nothing = ask(app.base_url, "redraft/none/openai:my-unlisted-model", rounds=1)
    # without a money budget the same model is served: the listener (its https endpoint) is called
    assert bounded_by_nothing.status_code != 400 and listener.connections >= 1


def test_with_a_money_budget_a_server_whose_own_model_has_no_price_does_not_start(
    fake: FakeLLMServer, tmp_path: Path
) -> None:
    unpriced = settings(tmp_path, run={"model": "azure:chat"}, usd_per_period=1.0)
    with pytest.raises(UserError, match=r"--usd-per-day .* drafter's model chat has no price there"):
        make_app(unpriced)
    make_app(settings(tmp_path, run={"model": "azure:gpt-4o-mini"}, usd_per_period=1.0))  # priced: it starts


MALFORMED = [
    b"\xff\xfe\x00{",
    b'{"model": "redraft/none", "messages": [{"role": "user", "content": "caf\xe9"}]}',
    b'{"a": ' * 100_000,
    b'{"model": "redraft/none", "messages": [{"role": "user", "content": "x"}], "redraft": {"data": '
    + b'{"a": ' * 100_000
    + b"1"
    + b"}" * 100_001
    + b"}",
    b'{"model": "redraft/none", "messages": [{"role": "user", "content": "x"}], "redraft": {"data": '
    + b'{"a": ' * 200
    + b"1"
    + b"}" * 201
    + b"}",
    b'{"model": 7, "messages": []}',
    b'{"model": "redraft/none", "messages": "hello"}',
    b'{"model": "redraft/none", "messages": [{"role": "user", "content": 5}]}',
    b'{"model": "redraft/none", "messages": [{"role": "user", "content": "x"}], "max_tokens": "many"}',
    b'{"model": "redraft/none", "messages": [{"role": "user", "content": "x"}], "redraft": {"budget": {"calls": "x"}}}',
    b'{"model": "redraft/none", "messages": [{"role": "user", "content": "x"}], "redraft": {"data": [1, 2]}}',
    b'{"model": "redraft/none", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}',
    b'{"model": "redraft/none", "messages": [{"role": "user", "content": "x"}], "temperature": 1e999}',
    b"[]",
    b"",
]


def test_a_malformed_body_is_a_400_in_openai_s_shape_never_a_500(tmp_path: Path) -> None:
    with served(settings(tmp_path, max_request_bytes=2_000_000)) as app:
        answers = [httpx.post(f"{app.base_url}/chat/completions", content=body, timeout=60) for body in MALFORMED]
        still = ask(app.base_url, "redraft/none")
    for body, answer in zip(MALFORMED, answers, strict=True):
        assert answer.status_code == 400, (body[:80], answer.status_code, answer.text[:200])
        assert set(answer.json()["error"]) == {"message", "type", "param", "code"}
    assert "not UTF-8" in answers[0].json()["error"]["message"] + answers[1].json()["error"]["message"]
    assert "nested" in answers[3].json()["error"]["message"] and "nested" in answers[4].json()["error"]["message"]
    assert still.status_code == 200
