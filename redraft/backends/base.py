"""One async Protocol for every model client, and the spec strings that select them.

A spec string (``local``, ``local:PATH.gguf``, ``scripted:MODULE:FUNC``) is parsed
on the driver by `redraft.backends.registry.resolve` into a picklable
`BackendSpec`, so a bad spec is a `UserError` before any actor starts; each role
actor then calls `create()` once, inside the actor, to build its client.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncGenerator, Callable
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import msgspec

from redraft.plaintext import plain_text
from redraft.protocols.messages import ChatMessage, Usage

C = TypeVar("C", bound="Closable")


class ChatRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A chat completion request, independent of any vendor's API."""

    messages: list[ChatMessage]
    max_tokens: int = 256
    temperature: float = 0.7
    seed: int | None = None
    json_schema: dict[str, Any] | None = None
    """When set, the reply must be JSON following this schema (enforced where the backend can)."""
    stop: list[str] = []
    stable_chars: int = 0
    """Where the prompt's stable prefix ends: every message before the last, and this many leading characters
    of the last (the system message, the instructions, the task and the template's words around it; never a
    candidate, feedback, a critique or a plan's state). One role's calls on one task share it byte for byte,
    so a provider can cache it: the ``anthropic`` backend marks its end with a ``cache_control`` breakpoint.
    0: no stable prefix is marked. It changes nothing in the reply, so the response cache's key leaves it out."""
    cache_key: str = ""
    """The same for every call of one task (OpenAI's ``prompt_cache_key``: calls with one key and one prefix
    are routed to the same cache); '' for none. Left out of the response cache's key, as ``stable_chars`` is."""

    def stable_prefix(self) -> list[ChatMessage]:
        """The messages of the stable prefix (the last one cut where it ends); [] when none is marked."""
        if self.stable_chars <= 0 or not self.messages:
            return []
        *earlier, last = self.messages
        return [*earlier, ChatMessage(role=last.role, content=last.content[: self.stable_chars])]


class Completion(msgspec.Struct, frozen=True, kw_only=True):
    """What a backend returns for one request."""

    text: str
    usage: Usage
    model: str
    finish_reason: str
    latency_s: float


@runtime_checkable
class Backend(Protocol):
    """A model client. Implementations must not block the event loop."""

    async def complete(self, request: ChatRequest) -> Completion: ...


class PlainReplies:
    """``inner``'s replies made plain (`redraft.plaintext.plain_text`): whatever a backend returns (a third
    party's, a test double, a local model's bytes), a reply a frame cannot carry costs a character, not the task
    and not the call it paid for. Every client a role calls its model through is one
    (`redraft.backends.cache.cached`)."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner

    async def complete(self, request: ChatRequest) -> Completion:
        completion = await self.inner.complete(request)
        text = plain_text(completion.text)
        return completion if text is completion.text else msgspec.structs.replace(completion, text=text)


@runtime_checkable
class BackendSpec(Protocol):
    """A validated, picklable description of a backend; `create` runs inside the actor."""

    @property
    def spec(self) -> str:
        """The spec string it was made from (safe to log: never holds a secret)."""
        ...

    def create(self) -> Backend: ...


class Closable(Protocol):
    """A client with an async ``close``: the SDKs' clients and aiohttp's session."""

    async def close(self) -> None: ...


class PerLoop(Generic[C]):
    """One client per running event loop, made on first use in that loop and closed when the loop shuts down.

    The clients send over aiohttp (the SDKs' ``DefaultAioHttpClient``, which spends less CPU per
    call than their default httpx transport: ``benchmarks/bench_http_clients.py`` measures both;
    or aiohttp itself, `redraft.backends._chat_wire`), and an aiohttp session belongs to the loop
    that opened it. An actor has one loop for its life, so one client; in-process callers that
    run several loops get one each.

    A loop that ``asyncio.run`` drives closes its async generators before it closes
    (``shutdown_asyncgens``). Each client is watched by one such generator, whose ``finally``
    closes it, so a caller that runs a loop per call (`redraft.refine`) leaves no session
    and no connection open behind it.
    """

    def __init__(self, make: Callable[[], C]) -> None:
        self._make = make
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[C, Any]] = weakref.WeakKeyDictionary()

    def get(self) -> C:
        loop = asyncio.get_running_loop()
        held = self._clients.get(loop)
        if held is None:
            client = self._make()
            watcher = _closed_at_shutdown(client)
            started = asyncio.ensure_future(watcher.asend(None))  # runs it to its yield: the loop now tracks it
            held = self._clients[loop] = (client, (watcher, started))  # the loop holds its generators weakly
        return held[0]


async def _closed_at_shutdown(client: Closable) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await client.close()
