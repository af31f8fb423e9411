"""A request to the batched host, its result, and its sequence's state while it decodes.

`Generation` and `Generated` are what a caller of `redraft.backends._llama_batch.BatchScheduler`
submits and gets back (that module exports both). A `Sequence` holds one request from its
admission to its result: its slot, its sampler, the tokens still to evaluate, and its text so far.
Only the scheduler thread reads or changes a `Sequence`.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from redraft.backends._llama_sampling import SamplerChain
from redraft.errors import BackendError


@dataclass(frozen=True)
class Generation:
    """One sampling request, already tokenized."""

    prompt: tuple[int, ...]
    max_tokens: int
    temperature: float
    seed: int | None
    stop: tuple[bytes, ...] = ()
    grammar: str | None = None
    """GBNF text (root rule ``root``) that every sampled token must keep satisfiable."""


@dataclass(frozen=True)
class Generated:
    """What a `Generation` produced."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


@dataclass
class Sequence:
    """One admitted request as the scheduler thread runs it, from its slot to its result."""

    request: Generation
    future: Future[Generated]
    slot: int = -1
    sampler: SamplerChain | None = None
    pending: list[int] = field(default_factory=list)
    """Tokens still to evaluate: the rest of the prompt, then the last sampled token."""
    position: int = 0
    held: tuple[int, ...] | None = None
    """What its slot's stream holds while its prompt waits for its turn; None once it is placed
    (`Slots.reuse_prefix`)."""
    followers: list[Sequence] = field(default_factory=list)
    """Sequences with the same prompt that copy this one's KV stream instead of evaluating it."""
    first_logits: Any = None
    """The logits row (a numpy array) the first draw was made from: a twin with the same prompt draws from it."""
    tokens: list[int] = field(default_factory=list)
    text: bytes = b""
    max_tokens: int = 0

    def evaluated(self) -> tuple[int, ...]:
        """The tokens its KV stream holds: the first `position` of its prompt and what it generated."""
        prompt = self.request.prompt
        if self.position <= len(prompt):
            return prompt[: self.position]
        return prompt + tuple(self.tokens[: self.position - len(prompt)])

    def add(self, token: int, piece: bytes) -> str | None:
        """Record a sampled token that does not end the generation, and its text ``piece``; the finish
        reason if the sequence is done ('stop': its text reached a stop string, and is cut before it; or
        'length')."""
        self.tokens.append(token)
        seen = len(self.text)
        self.text += piece
        # Only a stop string that ends in the new piece can be new.
        tail_start = max(0, seen - max((len(s) for s in self.request.stop), default=0))
        hits = [self.text.find(s, tail_start) for s in self.request.stop]
        hits = [h for h in hits if h >= 0]
        if hits:
            self.text = self.text[: min(hits)]
            return "stop"
        if len(self.tokens) >= self.max_tokens:
            return "length"
        return None

    def fail(self, error: BackendError) -> None:
        """Fail its call with ``error``, unless the call has its outcome already."""
        if not self.future.done():
            self.future.set_exception(error)
