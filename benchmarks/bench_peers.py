"""Model calls per second through redraft and through its peers, on one fake OpenAI-compatible server, in one run.

Every system talks over real HTTP to the same fake server (`fake_http_model`: its
own process, a fixed latency per request, 200 ms by default) about the same
arithmetic tasks (``get_scenario("arithmetic").tasks(seed=0)``), with the same
number of tasks under way at once ("in flight": 16, 64 and 256 at 200 ms, and 64
with no latency at all; for Ray Data, which has no tasks, requests). The systems:

- ``sequential``: one task at a time, one call at a time, the openai SDK's sync
  client; the refinement shape of bench_engine_throughput (K=3 drafts a round, the
  top two critiqued unless the round is the last, 3 rounds: 13 calls a task). Run
  once per latency, with a few tasks, at 1 in flight: the floor.
- ``hand``: the hand-written asyncio loop of bench_engine_throughput (same shape,
  ``openai.AsyncOpenAI``, a semaphore of IN_FLIGHT tasks): the reference.
- ``redraft``: ``redraft.run`` (adversarial, 3 samples, 3 rounds, cache off) on a
  local Ray the run starts, as in bench_engine_throughput; its Ray is shut down
  after each run so that it does not idle beside the next system.
- ``dspy``: ``dspy.Refine(dspy.Predict("question -> answer"), N=3, reward_fn,
  threshold=1.0)`` under ``dspy.Parallel(num_threads=IN_FLIGHT)``; reward 1.0 when the
  answer is the task's gold integer. Its shape is DSPy's: up to 3 attempts one after
  the other, with DSPy's feedback call between two attempts (up to 5 calls a task,
  one in flight per task). The fake server answers in DSPy's chat format when the
  request asks for it (see `fake_http_model`).
- ``ray_data``: Ray Data's LLM HTTP processor (``HttpRequestProcessorConfig`` +
  ``build_processor``): one pass, one chat request per row, no refinement; it gets as
  many rows as the hand loop makes calls (the tasks' prompts over and over), so both
  runs are as long. How its knobs are set to reach IN_FLIGHT: see
  ``peers/run_ray_data.py``.

DSPy and Ray Data run as subprocesses under a virtualenv of their own,
``benchmarks/.peers-venv/`` (made on the first run from ``peers/requirements.txt``,
exact versions, and reused after; not redraft's dependencies: DSPy's litellm needs
openai<3). The Ray Data subprocess starts a fresh local Ray of 2 CPUs, never one
that runs already, and shuts it down. The rest runs in this process, under
redraft's environment.

Columns (one JSON line per row as it ends, then a table):

- ``calls/s``: requests the server answered, over the time from the first to the
  last (its own counts and clocks, so start-up and shut-down are left out and every
  system is measured alike);
- ``x hand``: calls/s over the hand loop's at the same in-flight and latency, in
  this run;
- ``out``: requests out at once on average, calls/s times the latency (Little's
  law; blank with no latency);
- ``ideal/s``: what the concurrency allows if the client cost nothing: IN_FLIGHT
  times the requests a task has out at once, over the latency. A task of the shape
  above makes 13 calls in 5 waits (3 drafts, 2 critiques, 3 drafts, 2 critiques, 3
  drafts): 2.6 at once on average; a DSPy task and a Ray Data row have 1. redraft
  decides its own rounds (against this fake most tasks stop after 2 as stable: 10
  calls in 4 waits), so its requests out at once are counted from its trace: each
  run of draft or critique requests in a row went out together. Blank with no
  latency;
- ``% ideal``: calls/s over ideal/s. A short run can read a little above 100%: the
  span leaves out the last request's own wait;
- ``tasks``: tasks given (for ray_data: rows, one request each); ``calls``: requests
  answered.

Caveats: the machine has 2 cores and is shared, so absolute rates move with the
load; compare ratios from one run, not numbers across runs. At 256 in flight the
clients are CPU-bound on 2 cores, and so is the server beside them. The systems do
different work per call (redraft checks, records and journals every result; DSPy
builds and parses its prompts; Ray Data moves rows through its operators), so
calls/s is a throughput of the machinery, not of refinement quality. Nor do they
keep as many requests out at one in-flight setting: a hand or redraft task has
about 2.6 out, a DSPy task 1, so ``x hand`` is the rate at the same setting and
``% ideal`` what each made of its own concurrency.

Run: ``python benchmarks/bench_peers.py`` (6 minutes on 2 quiet cores, more when
they are busy; the first run adds the virtualenv, about a minute). ``--only
hand,dspy`` picks systems, ``--in-flight 16 64`` the levels, ``--latency`` the
server's seconds per request, ``--zero-latency-at 0`` drops the no-latency row,
``--tasks-per-slot`` the run length: IN_FLIGHT times it (4) tasks per level, at most
the scenario's 1,000.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from itertools import islice
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import fake_http_model
from bench_engine_throughput import CRITIQUED, ROUNDS, K, calls_per_s, hand_loop, through_redraft

HERE = Path(__file__).resolve().parent
SYSTEMS = ("sequential", "hand", "redraft", "dspy", "ray_data")
CALLS_PER_TASK = K * ROUNDS + CRITIQUED * (ROUNDS - 1)
WAITS_PER_TASK = ROUNDS + (ROUNDS - 1)  # drafts, then critiques, one wait each, in turn
AT_ONCE = {"sequential": 1.0, "hand": CALLS_PER_TASK / WAITS_PER_TASK}
"""Requests out at once per task, by the shape each system runs; redraft's is read from its trace."""
VENV = HERE / ".peers-venv"
REQUIREMENTS = HERE / "peers" / "requirements.txt"
WORKER_TIMEOUT_S = 1800


def _shown(path: Path) -> str:
    """``path`` relative to the repository, for printing."""
    return str(path.relative_to(HERE.parent))


def peers_python() -> Path:
    """The peers' virtualenv's python: made (or brought up to ``REQUIREMENTS``) once, reused after."""
    python = VENV / "bin" / "python"
    stamp = VENV / "requirements.installed"
    wanted = REQUIREMENTS.read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        print(f"peers' virtualenv: {_shown(VENV)} (reused)", flush=True)
        return python
    started = time.monotonic()
    print(f"peers' virtualenv: making {_shown(VENV)} from {_shown(REQUIREMENTS)} ...", flush=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    log = VENV / "logs" / "pip.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-r", str(REQUIREMENTS)]
        if subprocess.run(pip, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
            sys.exit(f"installing the peers failed; pip's output is in {_shown(log)}")
    stamp.write_text(wanted)
    print(f"peers' virtualenv: {_shown(VENV)} made in {time.monotonic() - started:.0f} s", flush=True)
    return python


def sequential_loop(url: str, tasks: list[Any]) -> None:
    """The hand loop's shape with no concurrency at all: one task, one call at a time, the sync client."""
    import openai

    from redraft.scenarios import get_scenario

    scenario = get_scenario("arithmetic")
    system = scenario.system_prompt()
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=600)
    for task in tasks:
        feedback = ""
        for round_ in range(ROUNDS):
            messages = [{"role": "system", "content": system}, {"role": "user", "content": task.prompt + feedback}]
            drafts = [
                client.chat.completions.create(model="fake", messages=messages, temperature=0.8, seed=k)
                .choices[0]
                .message.content
                or ""
                for k in range(K)
            ]
            scored = sorted(drafts, key=lambda d: -sum(c.passed for c in scenario.check(task, d)))
            if round_ == ROUNDS - 1:
                break
            critiques = [
                client.chat.completions.create(
                    model="fake",
                    messages=[{"role": "user", "content": f"Find the flaws in:\n{d}"}],
                    response_format={"type": "json_object"},
                )
                .choices[0]
                .message.content
                for d in scored[:CRITIQUED]
            ]
            feedback = f"\n\nYour last answer: {scored[0]}\nCritique: {critiques[0]}"


def run_worker(python: Path, script: str, args: list[str], log: Path) -> dict[str, Any]:
    """Run ``peers/SCRIPT`` under the peers' python; its last JSON line. Its stderr goes to ``log``."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS" and not k.startswith("PYTHON")}
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as err:
        done = subprocess.run(
            [str(python), str(HERE / "peers" / script), *args],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
            timeout=WORKER_TIMEOUT_S,
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{script} exited {done.returncode}; its stderr is in {_shown(log)}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _tasks_file(tasks: list[Any], system: str, path: Path) -> Path:
    path.write_text(
        json.dumps({"system": system, "tasks": [{"prompt": t.prompt, "answer": t.gold["answer"]} for t in tasks]})
    )
    return path


def measure(
    system: str, url: str, server_pid: int, tasks: list[Any], in_flight: int, latency: float, tmp: Path, python: Any
) -> dict[str, Any]:
    """Run one system once; its row (calls, calls/s; the ratios are filled in by the caller)."""
    from redraft.scenarios import get_scenario

    fake_http_model.reset(url)
    size = len(tasks)
    at_once = AT_ONCE.get(system, 1.0)
    if system == "sequential":
        sequential_loop(url, tasks)
    elif system == "hand":
        hand_loop(url, tasks, in_flight)
    elif system == "redraft":
        import ray

        out = tmp / f"redraft-{in_flight}-{latency}"
        through_redraft(url, size, in_flight, str(out), False, server_pid)
        ray.shutdown()
        at_once = requests_at_once(out / "trace.msgpack")
    else:
        spec = _tasks_file(tasks, get_scenario("arithmetic").system_prompt(), tmp / "tasks.json")
        log = VENV / "logs" / f"{system}-{in_flight}-{int(latency * 1000)}ms.log"
        if system == "dspy":
            run_worker(python, "run_dspy.py", [url, str(spec), str(in_flight)], log)
        else:
            size = len(tasks) * CALLS_PER_TASK
            run_worker(python, "run_ray_data.py", [url, str(spec), str(in_flight), str(size)], log)
    seen = fake_http_model.stats(url)
    calls, rate = calls_per_s(url)
    return {
        "system": system,
        "in_flight": in_flight,
        "latency_s": latency,
        "tasks": size,
        "calls": calls,
        "calls_per_s": round(rate, 1),
        "span_s": round(seen["last"] - seen["first"], 2),
        "at_once": round(at_once, 3),
    }


def requests_at_once(trace: Path) -> float:
    """The model requests a redraft task had out at once on average, from its run's trace: each run of draft or
    critique requests in a row was one batch, sent together."""
    from redraft.protocols.messages import CritiqueRequest, DraftRequest, iter_frames

    calls = waits = 0
    previous: type | None = None
    for message in iter_frames(trace.read_bytes()):
        kind = type(message)
        if kind in (DraftRequest, CritiqueRequest):
            calls += 1
            waits += kind is not previous
        previous = kind
    return calls / max(waits, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SYSTEMS), help=f"systems, comma-separated, of {','.join(SYSTEMS)}")
    parser.add_argument("--in-flight", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--latency", type=float, default=0.2, help="the server's seconds per request")
    parser.add_argument("--zero-latency-at", type=int, default=64, help="one more level with a latency of 0 (0: none)")
    parser.add_argument("--tasks-per-slot", type=int, default=4, help="tasks per task in flight (run length)")
    parser.add_argument("--sequential-tasks", type=int, default=3, help="tasks for the sequential floor")
    args = parser.parse_args()
    systems = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; pick from {','.join(SYSTEMS)}")
    systems = [s for s in SYSTEMS if s in systems]  # the hand loop before the others: their ratios need it

    plans = [(args.latency, level) for level in args.in_flight]
    if args.zero_latency_at and args.latency > 0:
        plans.append((0.0, args.zero_latency_at))
    python = peers_python() if {"dspy", "ray_data"} & set(systems) else None

    from redraft.scenarios import get_scenario

    rows: list[dict[str, Any]] = []
    with TemporaryDirectory() as tmp:
        for latency in dict.fromkeys(latency for latency, _ in plans):
            with fake_http_model.serve_in_background(latency) as (url, server_pid):
                levels = [level for lat, level in plans if lat == latency]
                runs = [("sequential", 1)] if "sequential" in systems else []
                runs += [(s, level) for level in levels for s in systems if s != "sequential"]
                hand_rate: dict[int, float] = {}
                for system, level in runs:
                    n = args.sequential_tasks if system == "sequential" else level * args.tasks_per_slot
                    tasks = list(islice(get_scenario("arithmetic").tasks(seed=0), n))
                    try:
                        row = measure(system, url, server_pid, tasks, level, latency, Path(tmp), python)
                    except Exception as exc:  # one system failing must not lose the others' rows
                        row = {"system": system, "in_flight": level, "latency_s": latency, "error": str(exc)}
                    if system == "hand" and "calls_per_s" in row:
                        hand_rate[level] = row["calls_per_s"]
                    if "calls_per_s" in row:
                        base = hand_rate.get(level) if system != "sequential" else None
                        row["vs_hand"] = round(row["calls_per_s"] / base, 3) if base else None
                        ideal = row["at_once"] * level / latency if latency > 0 else None
                        row["ideal_calls_per_s"] = round(ideal, 1) if ideal else None
                        row["share_of_ideal"] = round(row["calls_per_s"] / ideal, 3) if ideal else None
                        row["mean_out"] = round(row["calls_per_s"] * latency, 1) if latency > 0 else None
                    rows.append(row)
                    print(json.dumps(row), flush=True)

    print()
    print(
        f"{'system':<11} {'in flight':>9} {'latency ms':>10} {'tasks':>6} {'calls':>7} "
        f"{'calls/s':>8} {'out':>6} {'ideal/s':>8} {'% ideal':>8} {'x hand':>7}"
    )
    for r in rows:
        head = f"{r['system']:<11} {r['in_flight']:>9} {round(1000 * r['latency_s']):>10}"
        if "error" in r:
            print(f"{head}  failed: {r['error']}")
            continue
        ratio = f"{r['vs_hand']:.2f}" if r["vs_hand"] is not None else "-"
        share = f"{100 * r['share_of_ideal']:.0f}%" if r["share_of_ideal"] is not None else "-"
        ideal = r["ideal_calls_per_s"] if r["ideal_calls_per_s"] is not None else "-"
        out = r["mean_out"] if r["mean_out"] is not None else "-"
        print(f"{head} {r['tasks']:>6} {r['calls']:>7} {r['calls_per_s']:>8} {out:>6} {ideal:>8} {share:>8} {ratio:>7}")


if __name__ == "__main__":
    main()
