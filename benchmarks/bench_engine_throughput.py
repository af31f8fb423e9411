"""Model calls per second through redraft on Ray, against a hand-written asyncio loop, over real HTTP.

Both talk to the same fake OpenAI-compatible server (`fake_http_model`: its own
process, 200 ms per request) with the openai SDK, on the same arithmetic tasks,
with the same shape of work: K=3 drafts per round, the top two critiqued unless
the round is the last, up to 3 rounds. The hand loop is the ceiling a user could
write in an afternoon; the ratio says what the engine costs on top of it, both
measured in the same run, on the same (possibly busy) machine. The server counts
the requests, so both sides are measured alike: calls/s is the requests answered
between the first and the last one. On a busy machine (other work running) the
rates swing with the load; CPU seconds per model call do not: the hand loop's are
its process's, redraft's those of the driver and every process of the Ray it
started (GCS, raylet, actors), read from /proc until its last task finished.

Also printed: the time from calling `redraft.run` to the server's first
request (the first run starts Ray itself; later ones find it running), and from
the last request to `run` returning (shutting the run's actors down).

Run: ``python benchmarks/bench_engine_throughput.py`` (``--tasks-per-slot N`` for longer runs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from itertools import islice
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import fake_http_model

from redraft import RunHooks

K = 3
ROUNDS = 3
CRITIQUED = 2


async def _hand_task(client: Any, system: str, prompt: str, scenario: Any, task: Any) -> None:
    feedback = ""
    for round_ in range(ROUNDS):
        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt + feedback}]
        replies = await asyncio.gather(
            *(
                client.chat.completions.create(model="fake", messages=messages, temperature=0.8, seed=k)
                for k in range(K)
            )
        )
        drafts = [r.choices[0].message.content or "" for r in replies]
        scored = sorted(drafts, key=lambda d: -sum(c.passed for c in scenario.check(task, d)))
        if round_ == ROUNDS - 1:
            return
        critiques = await asyncio.gather(
            *(
                client.chat.completions.create(
                    model="fake",
                    messages=[{"role": "user", "content": f"Find the flaws in:\n{d}"}],
                    response_format={"type": "json_object"},
                )
                for d in scored[:CRITIQUED]
            )
        )
        feedback = f"\n\nYour last answer: {scored[0]}\nCritique: {critiques[0].choices[0].message.content}"


def hand_loop(url: str, tasks: list[Any], in_flight: int) -> float:
    """Run the tasks; the CPU seconds it took."""
    import openai

    from redraft.scenarios import get_scenario

    scenario = get_scenario("arithmetic")
    system = scenario.system_prompt()

    async def go() -> None:
        # Closed in its own loop: left to the garbage collector, its connections close after the loop has,
        # each with an "Event loop is closed" traceback.
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=600) as client:
            gate = asyncio.Semaphore(in_flight)

            async def one(task: Any) -> None:
                async with gate:
                    await _hand_task(client, system, task.prompt, scenario, task)

            await asyncio.gather(*(one(t) for t in tasks))

    cpu = time.process_time()
    asyncio.run(go())
    return time.process_time() - cpu


def process_stat(pid: int) -> tuple[int, float]:
    """(parent pid, CPU seconds so far) of process ``pid``, from /proc; OSError if it is gone."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_seconds(skip: int) -> float:
    """CPU seconds of this process and all its descendants (a local Ray's), but the process ``skip``."""
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parents[int(entry.name)], used[int(entry.name)] = process_stat(int(entry.name))
        except OSError:
            continue
    mine, todo = {os.getpid()}, [os.getpid()]
    while todo:
        parent = todo.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid != skip and pid not in mine]
        mine.update(children)
        todo += children
    return sum(used.get(pid, 0.0) for pid in mine)


def through_redraft(
    url: str, tasks: int, in_flight: int, out: str, cache: bool, server_pid: int
) -> tuple[float, float, float]:
    """Run redraft; (seconds from `run` to the first request, seconds from the last request to `run` returning,
    CPU seconds from the first request to the last task's end)."""
    from redraft import RunConfig, run

    spec = f"openai-compatible:fake@{url}/v1"
    config = RunConfig.build(
        strategy="adversarial",
        samples=K,
        max_rounds=ROUNDS,
        limit=tasks,
        max_tasks_in_flight=in_flight,
        drafter=spec,
        critic=spec,
        cache=cache,
        out=out,
    )
    cpu: dict[str, float] = {}
    done = 0

    def on_result(_result: Any) -> None:
        nonlocal done
        done += 1
        if done == 1:  # every actor is up by now; what remains is the steady state
            cpu["first"] = _cpu_seconds(server_pid)
            cpu["calls"] = fake_http_model.stats(url)["count"]
        if done == tasks:
            cpu["last"] = _cpu_seconds(server_pid)

    started = time.time()
    run(config, hooks=RunHooks(on_result=on_result))
    ended = time.time()
    seen = fake_http_model.stats(url)
    per_call = (cpu["last"] - cpu["first"]) / max(seen["count"] - cpu["calls"], 1)
    return seen["first"] - started, ended - seen["last"], per_call


def calls_per_s(url: str) -> tuple[int, float]:
    seen = fake_http_model.stats(url)
    return int(seen["count"]), seen["count"] / max(seen["last"] - seen["first"], 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks-per-slot", type=int, default=6, help="tasks per task in flight (run length)")
    parser.add_argument("--in-flight", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--latency", type=float, default=0.2, help="the server's seconds per request")
    parser.add_argument(
        "--cache", action="store_true", help="redraft with its response cache on (off: as the hand loop)"
    )
    args = parser.parse_args()

    rows: list[dict[str, Any]] = []
    with fake_http_model.serve_in_background(args.latency) as (url, server_pid), TemporaryDirectory() as tmp:
        from redraft.scenarios import get_scenario

        for in_flight in args.in_flight:
            n = in_flight * args.tasks_per_slot
            tasks = list(islice(get_scenario("arithmetic").tasks(seed=0), n))
            fake_http_model.reset(url)
            hand_cpu = hand_loop(url, tasks, in_flight)
            hand_calls, hand_rate = calls_per_s(url)
            fake_http_model.reset(url)
            startup, shutdown, cpu_per_call = through_redraft(
                url, n, in_flight, f"{tmp}/run-{in_flight}", args.cache, server_pid
            )
            calls, rate = calls_per_s(url)
            rows.append(
                {
                    "in_flight": in_flight,
                    "tasks": n,
                    "hand_calls": hand_calls,
                    "hand_calls_per_s": round(hand_rate, 1),
                    "redraft_calls": calls,
                    "redraft_calls_per_s": round(rate, 1),
                    "ratio": round(rate / hand_rate, 3),
                    "hand_cpu_ms_per_call": round(1000 * hand_cpu / hand_calls, 2),
                    "redraft_cpu_ms_per_call": round(1000 * cpu_per_call, 2),
                    "startup_to_first_call_s": round(startup, 2),
                    "last_call_to_return_s": round(shutdown, 2),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    print("(the first redraft run's start-up includes starting Ray; later runs reuse it)")
    header = (
        f"{'in flight':>9} {'hand calls/s':>13} {'redraft calls/s':>16} {'ratio':>6} "
        f"{'hand ms CPU/call':>17} {'redraft ms CPU/call':>20} {'start s':>8} {'end s':>6}"
    )
    print(header)
    for r in rows:
        print(
            f"{r['in_flight']:>9} {r['hand_calls_per_s']:>13} {r['redraft_calls_per_s']:>16} {r['ratio']:>6} "
            f"{r['hand_cpu_ms_per_call']:>17} {r['redraft_cpu_ms_per_call']:>20} "
            f"{r['startup_to_first_call_s']:>8} {r['last_call_to_return_s']:>6}"
        )


if __name__ == "__main__":
    main()
