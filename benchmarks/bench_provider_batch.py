"""Online against ``--batch``, on the same tasks, in one run: results, recorded cost, requests and wall time.

A server on 127.0.0.1 speaks OpenAI's Chat Completions and its Files + Batches APIs, and Anthropic's Messages and
Message Batches (the test suite's fake, which the real SDKs drive unchanged). It answers each request by a function
of its body, online or in a batch alike, and finishes a batch ``--batch-delay`` seconds after it was created. For
each provider, redraft runs the same arithmetic tasks (the adversarial strategy: drafts, critiques, revisions) once
online and once with ``--batch``, with the response cache off, and prints: whether every task's answer, score and
rounds are equal, the recorded cost of each and their ratio (the built-in prices: the batch price is half), the
model requests the server answered (online requests, or batch lines), the batches sent, and the wall times.

Run: ``python benchmarks/bench_provider_batch.py`` (``--tasks T``, ``--batch-delay S``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import date
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from redraft.rundir import result_records

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from tests.support.fake_llm_servers import FakeLLMServer

MODELS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-haiku-4-5"}


def reply(body: dict[str, Any]) -> str:
    if "response_format" in body:
        return '{"issues": []}'
    return f"Answer: {len(json.dumps(body['messages'])) % 7}"


def one_run(provider: str, out: Path, tasks: int, *, batch: bool) -> dict[str, Any]:
    from redraft import RunConfig, run

    config = RunConfig.build(
        scenario="arithmetic", model=MODELS[provider], limit=tasks, samples=2, max_rounds=3, seed=1,
        cache=False, batch=batch, out=str(out),
    )  # fmt: skip
    started = time.monotonic()
    summary = run(config).summary
    records = result_records(out)
    return {
        "wall_s": time.monotonic() - started,
        "cost_usd": summary.usage.cost_usd,
        "calls": summary.usage.calls,
        "outcomes": {r["task_id"]: (r["answer"], r["score"], r["rounds"]) for r in records},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--batch-delay", type=float, default=0.5, help="seconds a batch takes at the provider")
    args = parser.parse_args()
    rows: dict[str, dict[str, Any]] = {}
    with TemporaryDirectory() as tmp, FakeLLMServer() as server:
        server.reply_for, server.batch_delay_s = reply, args.batch_delay
        server.reply_text = '{"issues": []}'  # Anthropic's answers (the fake answers them all alike): a critique
        os.environ |= {"OPENAI_BASE_URL": server.openai_base_url, "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        os.environ.setdefault("OPENAI_API_KEY", "not-a-real-key")
        os.environ.setdefault("ANTHROPIC_API_KEY", "not-a-real-key")
        for provider in MODELS:
            server.model = MODELS[provider].split(":", 1)[1]  # what the server reports: priced by the table
            before = len(server.requests)
            online = one_run(provider, Path(tmp) / f"{provider}-online", args.tasks, batch=False)
            online["requests"] = len(server.requests) - before
            lines, batches = server.batch_lines_answered, len(server.batches)
            batched = one_run(provider, Path(tmp) / f"{provider}-batch", args.tasks, batch=True)
            batched["requests"] = server.batch_lines_answered - lines
            batched["batches"] = len(server.batches) - batches
            rows[provider] = {"online": online, "batch": batched}
    print(f"# {date.today()}, {platform.machine()}, {os.cpu_count()} cores: {args.tasks} arithmetic tasks, "
          f"adversarial, 2 drafts a round, 3 rounds at most; "
          f"a batch ends {args.batch_delay:g} s after it is sent")  # fmt: skip
    print(f"{'':>10} {'same results':>12} {'cost online':>12} {'cost batch':>11} {'ratio':>6} "
          f"{'requests':>9} {'lines':>6} {'batches':>7} {'wall online':>11} {'wall batch':>10}")  # fmt: skip
    for provider, row in rows.items():
        online, batched = row["online"], row["batch"]
        same = online["outcomes"] == batched["outcomes"]
        print(
            f"{provider:>10} {same!s:>12} {online['cost_usd']:>12.6f} {batched['cost_usd']:>11.6f} "
            f"{batched['cost_usd'] / max(online['cost_usd'], 1e-12):>6.3f} {online['requests']:>9} "
            f"{batched['requests']:>6} {batched['batches']:>7} {online['wall_s']:>11.1f} {batched['wall_s']:>10.1f}"
        )
    for row in rows.values():
        for side in row.values():
            side.pop("outcomes")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
