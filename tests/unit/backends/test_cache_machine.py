"""Pay-once for the response cache, as a state machine: calls asked and asked again, by this run and another, the
process killed (its cache dropped without closing, or between paying for an answer and storing it), a second process
reading the cache while the first writes, and the cache reopened, against a model of what was paid for.

The invariants:

- a call answered and stored is never paid again, by a resumed run or another (this node's cache);
- the only calls paid twice are those in flight at a kill (paid for, not yet stored);
- a hit answers what was paid for, with the usage it had, ``cache_hits=1``, and ``saved_calls=1`` only when
  another run (or nobody known) paid for it;
- every reader (a second process's cache) sees every stored answer.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import msgspec
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from redraft.backends.base import ChatRequest, Completion
from redraft.backends.cache import CachedBackend, ResponseCache
from redraft.protocols.messages import ChatMessage, Usage
from tests.support.machines import MACHINE

SPEC = "openai:gpt-4o-mini"
PAYERS = ("run-a", "run-b", "")
prompts = st.integers(0, 11)
payers = st.sampled_from(PAYERS)


def request(prompt: int) -> ChatRequest:
    return ChatRequest(messages=[ChatMessage(role="user", content=f"question {prompt}")], seed=prompt % 3)


class Provider:
    """The paid backend: counts what it is paid for, by request."""

    def __init__(self) -> None:
        self.paid: Counter[str] = Counter()

    async def complete(self, request: ChatRequest) -> Completion:
        key = ResponseCache.key(SPEC, request)
        self.paid[key] += 1
        usage = Usage(input_tokens=len(key), output_tokens=self.paid[key], calls=1)
        return Completion(text=f"answer {key[:8]}", usage=usage, model="gpt-4o-mini", finish_reason="stop", latency_s=0)


class ResponseCacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="redraft-cache-machine-"))
        self.path = self.tmp / "responses.sqlite"
        self.cache: ResponseCache | None = None
        self.provider = Provider()
        self.stored: dict[str, tuple[Completion, str]] = {}
        """What the cache must hold: each answer as paid for, and who paid."""
        self.excused: Counter[str] = Counter()

    def teardown(self) -> None:
        self.cache = None
        shutil.rmtree(self.tmp, ignore_errors=True)

    @initialize()
    def opened(self) -> None:
        self.cache = ResponseCache(self.path)

    @precondition(lambda self: self.cache is not None)
    @rule(prompt=prompts, payer=payers)
    def ask(self, prompt: int, payer: str) -> None:
        assert self.cache is not None
        key = ResponseCache.key(SPEC, request(prompt))
        paid = self.provider.paid[key]
        answer = asyncio.run(CachedBackend(self.provider, SPEC, self.cache, payer).complete(request(prompt)))
        if key in self.stored:
            stored, first = self.stored[key]
            assert self.provider.paid[key] == paid  # not paid again
            saved = int(not first or first != payer)
            usage = msgspec.structs.replace(stored.usage, cache_hits=1, saved_calls=saved)
            assert answer == msgspec.structs.replace(stored, usage=usage)
        else:
            assert self.provider.paid[key] == paid + 1 and answer.usage.cache_hits == 0
            self.stored[key] = (answer, payer)

    @precondition(lambda self: self.cache is not None)
    @rule(prompt=prompts)
    def killed_between_paying_and_storing(self, prompt: int) -> None:
        """The provider answered (paid), and the process died before the answer was stored."""
        key = ResponseCache.key(SPEC, request(prompt))
        if key not in self.stored:
            asyncio.run(self.provider.complete(request(prompt)))
            self.excused[key] += 1
        self.cache = None

    @precondition(lambda self: self.cache is not None)
    @rule()
    def killed(self) -> None:
        """The process dies: its cache is dropped, never closed."""
        self.cache = None

    @precondition(lambda self: self.cache is None)
    @rule()
    def reopened(self) -> None:
        self.cache = ResponseCache(self.path)
        self.every_answer_is_read_back(self.cache)

    @precondition(lambda self: self.cache is not None)
    @rule()
    def another_process_reads(self) -> None:
        """A second process opens the cache while the first holds it open, and reads every answer."""
        self.every_answer_is_read_back(ResponseCache(self.path))

    def every_answer_is_read_back(self, cache: ResponseCache) -> None:
        for key, (answer, payer) in self.stored.items():
            assert cache.get(key) == (answer, payer)

    @invariant()
    def no_call_is_paid_twice_but_those_in_flight_at_a_kill(self) -> None:
        for key, paid in self.provider.paid.items():
            assert paid <= 1 + self.excused[key], key


ResponseCacheMachine.TestCase.settings = MACHINE
test_the_response_cache_pays_for_a_call_once_across_kills_and_readers = ResponseCacheMachine.TestCase
