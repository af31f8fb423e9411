"""What the providers' prompt caches save a refinement loop: input cost with and without cache-ordered prompts.

A server on 127.0.0.1 speaks OpenAI's Chat Completions and Anthropic's Messages (the test suite's fake, which the
real SDKs drive unchanged), and caches as the providers document (tests/support/fake_prompt_cache.py): OpenAI
serves any prefix it saw before from 1,024 tokens on, Anthropic a prefix up to a ``cache_control`` breakpoint
that reaches the model's minimum. For each provider, redraft refines the same ``incident`` tasks in this process
(the adversarial strategy, 2 drafts a round, 3 rounds, the response cache off), twice:

- **cached**: the prompts as redraft sends them: the stable prefix (system, instructions, the task and its logs)
  first, its end marked (Anthropic's breakpoint), the task's ``prompt_cache_key`` (OpenAI);
- **uncached**: the same calls with the prefix unmarked and no cache key, and each prompt's last turn written
  in the other order (what changes first, then the task), as a loop that does not order its prompts sends them.

It prints each arm's input cost at the built-in prices (cached reads and cache writes at their own rates) and
their ratio, measured in the same run. Then, with ``--batch`` (on a local Ray, through the providers' batch
APIs, which the fake serves too): the cached arm's calls sent as batch lines, and their input cost against the
same tokens with nothing read from or written to a cache, both at the batch price (a batch's lines go out
together, so a task's second call finds its prefix cached only once its first came back: a round later).

Run: ``python benchmarks/bench_prompt_cache.py`` (``--tasks T``, ``--batch``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from redraft.backends.base import Backend, BackendSpec, ChatRequest, Completion
from redraft.protocols.messages import ChatMessage, Usage
from tests.support.fake_llm_servers import FakeLLMServer
from tests.support.fake_prompt_cache import FakePromptCache

MODELS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-sonnet-4-5"}
CRITIQUE = {"issues": [{"severity": "major", "quote": "Cause", "reason": "not what the logs show", "fix": "recheck"}]}


class Server(FakeLLMServer):
    """The fake, answering Anthropic's requests by `reply_for` too (a critique as the forced tool's input)."""

    def anthropic_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        self.reply_text = self.reply_for(body) if self.reply_for is not None else self.reply_text
        return super().anthropic_reply(body)


def replies() -> Any:
    count = itertools.count()

    def reply(body: dict[str, Any]) -> str:
        if "response_format" in body or "tools" in body:
            return json.dumps(CRITIQUE)
        return f"Cause: the database, attempt {next(count)}.\nTimeline: 12:00 first error."  # each draft differs

    return reply


@dataclass(frozen=True)
class Unordered:
    """A backend spec whose requests lose their cache hints and put what changes first (the uncached arm)."""

    inner: BackendSpec

    @property
    def spec(self) -> str:
        return self.inner.spec

    def create(self) -> Backend:
        return _Unordered(self.inner.create())


class _Unordered:
    def __init__(self, inner: Backend) -> None:
        self._inner = inner

    async def complete(self, request: ChatRequest) -> Completion:
        *earlier, last = request.messages
        cut = request.stable_chars
        swapped = ChatMessage(role=last.role, content=f"{last.content[cut:]}\n\n{last.content[:cut]}".strip())
        unordered = msgspec.structs.replace(request, messages=[*earlier, swapped], stable_chars=0, cache_key="")
        return await self._inner.complete(unordered)


def one_arm(provider: str, tasks: int, *, ordered: bool) -> Usage:
    from redraft import RunConfig, refine
    from redraft.backends.registry import resolve
    from redraft.scenarios import get_scenario

    spec = resolve(MODELS[provider])
    spec = spec if ordered else Unordered(spec)
    config = RunConfig.build(
        scenario="incident", model=MODELS[provider], strategy="adversarial", samples=2, max_rounds=3, patience=5,
        seed=1, cache=False, max_tokens=256,
    )  # fmt: skip
    total = Usage()
    for task in itertools.islice(get_scenario("incident").tasks(seed=1), tasks):
        total = total + refine(task, config, backends={"drafter": spec, "critic": spec}).result.usage
    return total


def batch_arm(provider: str, tasks: int, out: Path) -> Usage:
    """The cached arm through the provider's batch API, as ``redraft run --batch`` sends it (on a local Ray)."""
    from redraft import RunConfig, run

    config = RunConfig.build(
        scenario="incident", model=MODELS[provider], strategy="adversarial", samples=2, max_rounds=3, patience=5,
        seed=1, cache=False, max_tokens=256, batch=True, limit=tasks, out=str(out),
    )  # fmt: skip
    return run(config).summary.usage


def input_cost(model: str, usage: Usage) -> float:
    from redraft.backends.pricing import default_prices

    return default_prices().cost(model, msgspec.structs.replace(usage, output_tokens=0)) or 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--batch", action="store_true", help="also the batch APIs' arm (starts a local Ray)")
    args = parser.parse_args()
    rows: dict[str, dict[str, Any]] = {}
    with Server() as server:
        os.environ |= {"OPENAI_BASE_URL": server.openai_base_url, "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        os.environ.setdefault("OPENAI_API_KEY", "not-a-real-key")
        os.environ.setdefault("ANTHROPIC_API_KEY", "not-a-real-key")
        for provider, name in MODELS.items():
            model = server.model = name.split(":", 1)[1]  # what the server reports: priced by the table
            row = rows[provider] = {}
            for arm, ordered in (("uncached", False), ("cached", True)):
                server.prompt_cache, server.reply_for = FakePromptCache(), replies()  # a cold cache per arm
                usage = one_arm(provider, args.tasks, ordered=ordered)
                row[arm] = figures(model, usage)
            if args.batch:
                server.prompt_cache, server.reply_for = FakePromptCache(), replies()
                with TemporaryDirectory() as tmp:
                    usage = batch_arm(provider, args.tasks, Path(tmp) / provider)
                row["batch"] = figures(model, usage)
                nothing = msgspec.structs.replace(usage, cached_tokens=0, cache_write_tokens=0)
                row["batch"]["input_usd_uncached"] = input_cost(model, nothing)
    print(f"# {platform.machine()}, {os.cpu_count()} cores: {args.tasks} incident tasks, adversarial, 2 drafts a "
          f"round, 3 rounds, online")  # fmt: skip
    print(f"{'':>10} {'calls':>6} {'input tokens':>13} {'read':>10} {'written':>9} "
          f"{'input $ uncached':>17} {'input $ cached':>15} {'ratio':>6}")  # fmt: skip
    for provider, row in rows.items():
        off, on = row["uncached"], row["cached"]
        print(
            f"{provider:>10} {on['calls']:>6} {on['input_tokens']:>13,} {on['cached_tokens']:>10,} "
            f"{on['cache_write_tokens']:>9,} {off['input_usd']:>17.6f} {on['input_usd']:>15.6f} "
            f"{on['input_usd'] / max(off['input_usd'], 1e-12):>6.3f}"
        )
    if args.batch:
        print("# --batch: the cached arm through the batch APIs, against the same tokens with no cache (batch price)")
        print(f"{'':>10} {'calls':>6} {'batch calls':>11} {'input tokens':>13} {'read':>10} {'written':>9} "
              f"{'input $ no cache':>17} {'input $ cached':>15} {'ratio':>6}")  # fmt: skip
        for provider, row in rows.items():
            on = row["batch"]
            print(
                f"{provider:>10} {on['calls']:>6} {on['batch_calls']:>11} {on['input_tokens']:>13,} "
                f"{on['cached_tokens']:>10,} {on['cache_write_tokens']:>9,} {on['input_usd_uncached']:>17.6f} "
                f"{on['input_usd']:>15.6f} {on['input_usd'] / max(on['input_usd_uncached'], 1e-12):>6.3f}"
            )
    print(json.dumps(rows))


def figures(model: str, usage: Usage) -> dict[str, Any]:
    return {
        "calls": usage.calls,
        "batch_calls": usage.batch_calls,
        "input_tokens": usage.input_tokens,
        "cached_tokens": usage.cached_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "input_usd": input_cost(model, usage),
    }


if __name__ == "__main__":
    main()
