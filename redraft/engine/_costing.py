"""The doubles an estimate runs the real loop with: a model that calls nothing and a verifier that runs nothing.

`CostingBackend` stands in for every model role. It counts a request's prompt at
`CHARS_PER_TOKEN` characters a token, plus `MESSAGE_TOKENS` a message (an
approximation: English prose and code run at about four characters a token with the
GPT and Claude tokenizers), and answers with ``fill`` of the request's ``max_tokens``,
charged as exactly that many output tokens (a critique or a plan of questions, whose
schema bounds its text, is charged what its text holds unless ``fill`` is 1: the worst
case charges every answer its max tokens, what an API may bill). Its text is what the loop passes on to
later prompts (a revision quotes the best answer so far, a critic the candidate), so it
is written out at four characters a token: random characters from a wide alphabet, so
that no two answers look alike (no leader repeats an earlier one, which would stop a
task as ``stable``) and comparing them costs next to nothing. Where a schema is asked
for, the text is a critique, a plan of questions, a plan of `PLAN_STEPS` steps or a decision to go
on, that fills the schema's bounds by ``fill``. An answer is written out to at most `MAX_TEXT_TOKENS`;
it is charged in full.

See docs/architecture.md, section "The estimate's doubles: prompt caching and verdicts".
"""

from __future__ import annotations

import json
import math
import random
import zlib
from dataclasses import dataclass
from typing import Any, Literal

from redraft.backends.base import Backend, BackendSpec, ChatRequest, Completion
from redraft.engine._answers import (
    MAX_ISSUES,
    MAX_QUESTION_TEXT,
    MAX_QUESTIONS,
    critique_json_schema,
    plan_json_schema,
    question_json_schema,
)
from redraft.engine.prompts import MAX_DETAIL_CHARS, MAX_FEEDBACK_CHARS
from redraft.engine.verifier import Verifier
from redraft.protocols.messages import MAX_ISSUE_TEXT, ChatMessage, CheckResult, Observation, Usage, VerifyRequest

CHARS_PER_TOKEN = 4
"""Characters of a prompt counted as one token."""
MESSAGE_TOKENS = 4
"""Tokens a chat message costs beyond its text (its role and separators)."""
MAX_TEXT_TOKENS = 16_384
"""An answer's text is written out to this many tokens at most (it is charged in full)."""
_FIRST_PAGE, _PAGES = 0x4E, 64
"""A text's characters are drawn from one of 64 pages of 256 CJK ideographs (U+4E00 to U+8DFF): two texts share no
character at all 63 times in 64, and next to no run of characters otherwise, so comparing them (is a leader a repeat
of an earlier one?) is quick, and never finds them alike."""
_CRITIQUE_SCHEMA = critique_json_schema()
_QUESTION_SCHEMA = question_json_schema()
_PLAN_SCHEMA = plan_json_schema("plan")
_DECISION_SCHEMA = plan_json_schema("decision")
PLAN_STEPS = 5
"""Steps of a simulated plan: the most the plan prompt asks for."""


@dataclass(frozen=True)
class Course:
    """How every simulated task goes: its candidates pass at once, or fail every round; and how much of its
    limit each text fills (answers, critiques, feedback)."""

    passes: bool
    fill: float


def prompt_tokens(messages: list[ChatMessage]) -> int:
    """A prompt's tokens by the estimate's rule (`CHARS_PER_TOKEN`, `MESSAGE_TOKENS`)."""
    return sum(math.ceil(len(m.content) / CHARS_PER_TOKEN) + MESSAGE_TOKENS for m in messages)


def random_text(chars: int, seed: object) -> str:
    """``chars`` random characters, the same for the same seed."""
    rng = random.Random(zlib.crc32(repr(seed).encode()))
    count = max(1, chars)
    units = bytearray(2 * count)  # UTF-16 code units, little-endian: made in C, not a character at a time
    units[0::2] = rng.randbytes(count)
    units[1::2] = bytes([_FIRST_PAGE + rng.randrange(_PAGES)]) * count
    return units.decode("utf-16-le")


@dataclass(frozen=True)
class PromptCaching:
    """How a provider's prompt cache serves a stable prefix: ``anthropic`` at a breakpoint, written the first time;
    ``openai`` by itself, nothing to write; from ``minimum`` tokens. ``cold``: nothing is ever read back."""

    provider: Literal["openai", "anthropic"]
    minimum: int
    cold: bool = False

    @classmethod
    def of(cls, spec: BackendSpec, cold: bool = False) -> PromptCaching | None:
        """The cache of the provider ``spec`` calls (OpenAI itself or Anthropic); None for any other backend."""
        from redraft.backends import anthropic, batchable, openai

        inner = batchable(spec)  # the providers themselves: no compatible server, no Azure deployment
        if isinstance(inner, anthropic.AnthropicSpec):
            return cls("anthropic", anthropic.cache_minimum_tokens(inner.model), cold)
        return None if inner is None else cls("openai", openai.CACHE_MINIMUM_TOKENS, cold)


class CostingBackend:
    """Answers without calling anything; see the module docstring."""

    def __init__(self, model: str, fill: float, batch: bool = False, caching: PromptCaching | None = None) -> None:
        self.model = model
        self.fill = fill
        self.batch = batch
        """Its calls go through the provider's batch API (``--batch``): priced at the batch price."""
        self.caching = caching
        self._cached: set[tuple[str, int]] = set()
        """The stable prefixes sent so far, by task (``cache_key``) and their text's hash."""

    async def complete(self, request: ChatRequest) -> Completion:
        seed = (request.seed, request.messages[-1].content[-64:], len(request.messages[-1].content))
        text, tokens = self._answer(request, seed)
        read, written = self._cache(request)
        return Completion(
            text=text,
            usage=Usage(
                input_tokens=prompt_tokens(request.messages),
                output_tokens=tokens,
                calls=1,
                batch_calls=int(self.batch),
                cached_tokens=read,
                cache_write_tokens=written,
            ),
            model=self.model,
            finish_reason="length",
            latency_s=0.0,
        )

    def _cache(self, request: ChatRequest) -> tuple[int, int]:
        """The prompt's tokens read from the provider's cache, and written to it (see the module docstring)."""
        caching, prefix = self.caching, request.stable_prefix()
        size = prompt_tokens(prefix)
        if caching is None or not prefix or size < caching.minimum:
            return 0, 0
        key = (request.cache_key, hash(tuple(m.content for m in prefix)))
        seen = key in self._cached and not caching.cold
        self._cached.add(key)
        if caching.provider == "anthropic":
            return (size, 0) if seen else (0, size)
        return (size if seen else 0), 0

    def _answer(self, request: ChatRequest, seed: object) -> tuple[str, int]:
        """The answer's text and the output tokens it is charged: ``fill`` of its max tokens; a structured
        answer, bounded by its schema, is charged what its text holds, unless it is charged in full."""
        if request.json_schema == _CRITIQUE_SCHEMA:
            text = json.dumps({"issues": [self._issue(seed, k) for k in range(MAX_ISSUES)]}, ensure_ascii=False)
        elif request.json_schema == _QUESTION_SCHEMA:
            size = max(1, int(self.fill * MAX_QUESTION_TEXT))
            questions = [random_text(size, (seed, k)) for k in range(MAX_QUESTIONS)]
            text = json.dumps({"questions": questions}, ensure_ascii=False)
        elif request.json_schema == _PLAN_SCHEMA:
            size = max(1, int(self.fill * 200))
            steps = [{"intent": random_text(size, (seed, k)), "output": f"step{k}.csv"} for k in range(PLAN_STEPS)]
            text = json.dumps({"steps": steps}, ensure_ascii=False)
        elif request.json_schema == _DECISION_SCHEMA:  # go on: a plan that never verifies ends by its stall limit
            text = json.dumps({"action": "continue", "reason": random_text(max(1, int(self.fill * 200)), seed)})
        else:
            tokens = max(1, round(self.fill * request.max_tokens))
            return random_text(min(tokens, MAX_TEXT_TOKENS) * CHARS_PER_TOKEN, seed), tokens
        return text, request.max_tokens if self.fill >= 1 else math.ceil(len(text) / CHARS_PER_TOKEN)

    def _issue(self, seed: object, k: int) -> dict[str, Any]:
        size = max(1, int(self.fill * MAX_ISSUE_TEXT))
        fields = ("quote", "reason", "fix")
        return {"severity": "critical"} | {name: random_text(size, (seed, k, name)) for name in fields}


@dataclass(frozen=True)
class CostingSpec:
    """The spec of a `CostingBackend` standing in for the model ``model``."""

    model: str
    fill: float
    spec: str = "costing"
    batch: bool = False
    caching: PromptCaching | None = None

    def create(self) -> Backend:
        return CostingBackend(self.model, self.fill, self.batch, self.caching)


class CostingVerifier(Verifier):
    """A `Verifier` whose checks are the course's verdicts (see the module docstring); its model, when a
    strategy asks it questions, is a `CostingBackend` like every other role's."""

    def __init__(self, *args: Any, course: Course, rounds: int, threshold: float, **kwargs: Any) -> None:
        super().__init__(*args, parallel=1, **kwargs)
        self._inline = True  # nothing to run: no worker thread
        self._course = course
        self._rounds = rounds
        self._threshold = threshold

    def _check(self, request: VerifyRequest) -> tuple[list[CheckResult], str | None, Observation | None]:
        step = request.step
        if self._course.passes:
            ran = None if step is None else Observation(step=step.step.number, output=step.step.output, written=True)
            return [CheckResult(name="estimate", passed=True, score=1.0, detail="passes")], None, ran
        draft = request.draft
        score = self._threshold * (draft.round + 1) / (self._rounds + 1)  # rising, below the threshold
        size = max(1, int(self._course.fill * MAX_DETAIL_CHARS))
        return (
            [
                CheckResult(
                    name=f"estimate_{k}",
                    passed=False,
                    score=score,
                    detail=random_text(size, (draft.task_id, draft.round, draft.sample, request.stage, k)),
                )
                for k in range(MAX_FEEDBACK_CHARS // MAX_DETAIL_CHARS)  # as much feedback as a prompt carries
            ],
            None,
            None,
        )
