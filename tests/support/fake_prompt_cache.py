"""The providers' prompt caches, as the fake servers report them: a prefix seen before, long enough, is cached.

`FakeLLMServer.prompt_cache`, when set, makes its usage a function of the request body (online and in
batches alike), at about four characters a token:

- **OpenAI** caches by itself: a prompt's prefix that an earlier prompt shared, from `OPENAI_MINIMUM` tokens
  on, in steps of 128 tokens, is reported in ``prompt_tokens_details.cached_tokens`` (a subset of
  ``prompt_tokens``). The ``prompt_cache_key`` only routes requests at OpenAI, so it is recorded, not needed.
- **Anthropic** caches only at a ``cache_control`` breakpoint: the prompt up to and including the marked block
  (tools, then system, then the messages), if it reaches the model's minimum (`ANTHROPIC_MINIMUMS`), is a
  cache write the first time (``cache_creation_input_tokens``) and a read after
  (``cache_read_input_tokens``); ``input_tokens`` is the rest. No breakpoint, no cache.
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any

CHARS_PER_TOKEN = 4
OPENAI_MINIMUM = 1024
OPENAI_STEP = 128
ANTHROPIC_MINIMUMS = {"claude-opus-4-5": 4096, "claude-haiku-4-5": 4096, "claude-3-5-haiku": 2048}
"""Anthropic's documented minimums where they are not 1,024 tokens (the fake's own copy of the figures)."""


def tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class FakePromptCache:
    """Every prompt either provider was sent, and what of each was cached; safe across the server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._openai: list[str] = []
        self._anthropic: set[str] = set()
        self.keys: list[str | None] = []
        """The ``prompt_cache_key`` of each OpenAI request, in order."""

    def openai_usage(self, body: dict[str, Any], output_tokens: int) -> dict[str, Any]:
        prompt = "".join(f"\0{m['role']}\0{_text(m['content'])}" for m in body.get("messages", []))
        with self._lock:
            shared = max((_shared(prompt, seen) for seen in self._openai), default=0)
            self._openai.append(prompt)
            self.keys.append(body.get("prompt_cache_key"))
        cached = tokens(prompt[:shared]) if shared < len(prompt) else tokens(prompt) - 1  # one token is always new
        cached = 0 if cached < OPENAI_MINIMUM else cached - (cached - OPENAI_MINIMUM) % OPENAI_STEP
        total = tokens(prompt)
        return {
            "prompt_tokens": total,
            "completion_tokens": output_tokens,
            "total_tokens": total + output_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    def anthropic_usage(self, body: dict[str, Any], output_tokens: int) -> dict[str, Any]:
        blocks = _anthropic_blocks(body)
        total = sum(tokens(text) for text, _ in blocks)
        marked = [i for i, (_, mark) in enumerate(blocks) if mark]
        read = written = 0
        if marked:
            prefix = blocks[: marked[-1] + 1]
            size = sum(tokens(text) for text, _ in prefix)
            key = json.dumps([text for text, _ in prefix])
            if size >= _anthropic_minimum(str(body.get("model", ""))):
                with self._lock:
                    seen = key in self._anthropic
                    self._anthropic.add(key)
                read, written = (size, 0) if seen else (0, size)
        return {
            "input_tokens": total - read - written,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        }


def _shared(one: str, other: str) -> int:
    """Characters at the start of ``one`` and ``other`` that are the same."""
    return next((i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b), min(len(one), len(other)))


def _anthropic_minimum(model: str) -> int:
    matches = [key for key in ANTHROPIC_MINIMUMS if model.startswith(key)]
    return ANTHROPIC_MINIMUMS[max(matches, key=len)] if matches else 1024


def _anthropic_blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The prompt as (text, marked) blocks in the order Anthropic caches them: tools, system, messages."""
    blocks = [(json.dumps(tool, sort_keys=True), "cache_control" in tool) for tool in body.get("tools", [])]
    system = body.get("system")
    if system:
        blocks += _content_blocks("system", system)
    for message in body.get("messages", []):
        blocks += _content_blocks(message["role"], message["content"])
    return blocks


def _content_blocks(role: str, content: str | list[dict[str, Any]]) -> list[tuple[str, bool]]:
    if isinstance(content, str):
        return [(f"{role}\0{content}", False)]
    return [(f"{role}\0{block.get('text', '')}", "cache_control" in block) for block in content]


def _text(content: str | list[dict[str, Any]]) -> str:
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
