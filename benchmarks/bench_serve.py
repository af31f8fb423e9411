"""What ``redraft serve`` adds to a model call, and what it serves at 64 clients against ``redraft run``.

A fake OpenAI-compatible model server on 127.0.0.1 (the test suite's) answers every request after
``--latency`` seconds with an answer the check passes, so every task is one call. Measured in one run:

- **latency**: ``--requests`` chat completions one after the other, straight to the model server with the
  ``openai`` SDK, then through redraft's server with strategy ``none`` (one draft, checked, no refinement):
  each median, and the median latency the server adds;
- **throughput**: the same number of requests from 64 concurrent clients (the SDK's async client) through the
  server, against ``redraft run`` on as many tasks of the same prompt on the same model server (strategy
  ``none``, 64 tasks in flight: its wall time from the command's start, Ray's and its actors' start-up
  included, and from its first result).

The server runs in this process (``redraft.serving.serving``: the same application Ray Serve hosts in a
replica, on uvicorn in a thread, with no Ray Serve proxy in front); ``--ray-serve`` also starts ``redraft
serve`` itself on a local Ray and measures the latency through Ray Serve's proxy and its replica. ``--replicas
1 2`` measures the throughput at 64 clients through Ray Serve (its proxy, then the replicas, each request a task
on the replica's fleet of role actors) with one replica, then two, on a local Ray started here.

Run: ``python benchmarks/bench_serve.py`` (``--requests N``, ``--latency S``, ``--ray-serve``, ``--replicas N...``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository root: tests.support
os.chdir(ROOT)  # the check's module, tests.support.serving, imports alike in Ray's workers
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from tests.support.fake_llm_servers import FakeLLMServer  # noqa: E402

CHECK = "tests.support.serving:says_42"
PROMPT = "What is six times seven? End with 'Answer: N'."
CLIENTS = 64


def median_ms(samples: list[float]) -> float:
    return 1000 * statistics.median(samples)


def direct_latency(base_url: str, model: str, requests: int) -> list[float]:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    took = []
    for _ in range(requests):
        started = time.perf_counter()
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": PROMPT}], max_tokens=64)
        took.append(time.perf_counter() - started)
    return took


def served_latency(base_url: str, requests: int) -> list[float]:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    took = []
    for _ in range(requests):
        started = time.perf_counter()
        done = client.chat.completions.create(
            model="redraft/none",
            messages=[{"role": "user", "content": PROMPT}],
            extra_body={"redraft": {"check": "ok"}},
        )
        took.append(time.perf_counter() - started)
        assert done.model_extra is not None and done.model_extra["redraft"]["passed"], done
    return took


def served_throughput(base_url: str, requests: int) -> float:
    """Requests a second from `CLIENTS` concurrent clients."""
    import openai

    async def every() -> float:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)
        gate = asyncio.Semaphore(CLIENTS)

        async def one() -> None:
            async with gate:
                await client.chat.completions.create(
                    model="redraft/none",
                    messages=[{"role": "user", "content": PROMPT}],
                    extra_body={"redraft": {"check": "ok"}},
                )

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(requests)))
        return requests / (time.perf_counter() - started)

    return asyncio.run(every())


def run_throughput(model: str, requests: int, out: Path) -> tuple[float, float]:
    """``redraft run`` on ``requests`` tasks: tasks a second from the command's start, and from its first result."""
    from redraft import RunConfig, run

    tasks = out.parent / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "prompt": PROMPT}) + "\n" for i in range(requests)))
    config = RunConfig.build(
        tasks=str(tasks), scenario=f"check:{CHECK}", model=model, strategy="none", out=str(out), cache=False,
        max_tasks_in_flight=CLIENTS,
    )  # fmt: skip
    results = out / "results.jsonl"
    first: list[float] = []
    done = threading.Event()

    def watch() -> None:  # when the first record lands
        while not done.wait(0.02):
            if results.exists() and results.stat().st_size:
                first.append(time.perf_counter())
                return

    watcher = threading.Thread(target=watch, daemon=True)
    started = time.perf_counter()
    watcher.start()
    run(config)
    ended = time.perf_counter()
    done.set()
    watcher.join()
    lines = results.read_text().splitlines()
    assert len(lines) == requests and all(json.loads(line)["passed"] for line in lines)
    return requests / (ended - started), (requests - 1) / max(ended - (first[0] if first else started), 1e-9)


def ray_serve_latency(model: str, requests: int, out: Path) -> list[float]:
    """``redraft serve`` on a local Ray (Ray Serve's proxy, then a replica): the latency of each request."""
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [
        sys.executable, "-m", "redraft.cli", "serve", "--model", model, "--check", f"ok={CHECK}", "--port", str(port),
        "--out", str(out),
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    said = server.stderr.read() if server.stderr else ""
                    raise RuntimeError(f"redraft serve did not start: {said}") from None
                time.sleep(1)
        served_latency(f"http://127.0.0.1:{port}/v1", 5)  # warm the replica's arbiter
        return served_latency(f"http://127.0.0.1:{port}/v1", requests)
    finally:
        server.terminate()
        server.wait(timeout=120)


def cpu_seconds() -> dict[str, float]:
    """CPU seconds so far of this process (the clients and the model server) and of each kind of process of the
    local Ray it started (its descendants: ``ray::ProxyActor``, ``ray::ServeReplica...``, ``ray::ArbiterActor``...)."""
    import psutil

    me = psutil.Process()
    spent = {"clients and model server": sum(me.cpu_times()[:2])}
    for child in me.children(recursive=True):
        try:
            line = " ".join(child.cmdline())
            times = child.cpu_times()
        except psutil.Error:
            continue
        kind = line[5:].split()[0].split(".")[0] if line.startswith("ray::") else Path(line.split()[0]).name
        spent[kind] = spent.get(kind, 0.0) + times.user + times.system
    return spent


def replicas_throughput(
    model: str, requests: int, counts: list[int], out: Path
) -> dict[int, tuple[float, dict[str, float]]]:
    """Requests a second from `CLIENTS` clients through Ray Serve with each of ``counts`` replicas (fixed), and
    the CPU milliseconds a request cost each kind of process."""
    from ray import serve

    from redraft.actors import ensure_ray
    from redraft.serving import PROXY_CALLBACK, PROXY_CALLBACK_VARIABLE, ServeSettings
    from redraft.serving._deployment import run_on_serve

    os.environ.setdefault(PROXY_CALLBACK_VARIABLE, PROXY_CALLBACK)
    ensure_ray(None)
    measured = {}
    for count in counts:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        settings = ServeSettings(run={"model": model, "strategy": "none"}, checks={"ok": CHECK}, port=port,
                                 out=str(out / str(count)))  # fmt: skip
        run_on_serve(settings, max_replicas=count, min_replicas=count)
        try:
            base_url = f"http://127.0.0.1:{port}/v1"
            served_throughput(base_url, 4 * CLIENTS)  # every replica's fleet leased and warm
            before = cpu_seconds()
            rps = served_throughput(base_url, requests)
            after = cpu_seconds()
            per_request = {k: 1000 * (v - before.get(k, 0.0)) / requests for k, v in after.items()}
            measured[count] = rps, {k: round(v, 2) for k, v in per_request.items() if v >= 0.05}
        finally:
            serve.shutdown()  # type: ignore[no-untyped-call]
    return measured


def main() -> None:
    from redraft.serving import ServeSettings, serving

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.05, help="the model server's latency, seconds")
    parser.add_argument("--ray-serve", action="store_true", help="also through redraft serve on a local Ray")
    parser.add_argument("--replicas", type=int, nargs="*", default=[], help="Ray Serve with N replicas")
    args = parser.parse_args()
    rows: dict[str, Any] = {}
    with FakeLLMServer() as fake, tempfile.TemporaryDirectory() as tmp:
        fake.reply_text, fake.latency_s = "Six times seven.\nAnswer: 42", args.latency
        model = f"openai-compatible:{fake.model}@{fake.openai_base_url}"
        direct = direct_latency(fake.openai_base_url, fake.model, args.requests)
        settings = ServeSettings(run={"model": model, "strategy": "none"}, checks={"ok": CHECK}, port=0,
                                 out=str(Path(tmp) / "serve"))  # fmt: skip
        with serving(settings) as server:
            served_latency(server.base_url, 5)  # warm the arbiter this request shape uses
            served = served_latency(server.base_url, args.requests)
            rows["served_rps"] = served_throughput(server.base_url, args.requests)
        rows["run_rps"], rows["run_rps_after_start"] = run_throughput(model, args.requests, Path(tmp) / "run")
        rows["direct_ms"], rows["served_ms"] = median_ms(direct), median_ms(served)
        if args.ray_serve:
            rows["ray_serve_ms"] = median_ms(ray_serve_latency(model, args.requests, Path(tmp) / "ray-serve"))
        if args.replicas:
            rows["replicas_rps"] = replicas_throughput(model, args.requests, args.replicas, Path(tmp) / "replicas")
    print(f"# {date.today()}, {platform.machine()}, {os.cpu_count()} cores: the model server answers in "
          f"{args.latency * 1000:g} ms; {args.requests} requests")  # fmt: skip
    print(f"latency, median: model server directly {rows['direct_ms']:.1f} ms; through redraft's server "
          f"{rows['served_ms']:.1f} ms (+{rows['served_ms'] - rows['direct_ms']:.1f} ms, "
          f"{rows['served_ms'] / rows['direct_ms']:.2f}x)")  # fmt: skip
    if "ray_serve_ms" in rows:
        print(f"latency, median, through redraft serve on Ray Serve: {rows['ray_serve_ms']:.1f} ms "
              f"(+{rows['ray_serve_ms'] - rows['direct_ms']:.1f} ms)")  # fmt: skip
    print(f"throughput at {CLIENTS} clients: redraft's server {rows['served_rps']:.1f} requests/s; redraft run "
          f"{rows['run_rps']:.1f} tasks/s from its start ({rows['served_rps'] / rows['run_rps']:.2f}x), "
          f"{rows['run_rps_after_start']:.1f} tasks/s from its first result "
          f"({rows['served_rps'] / rows['run_rps_after_start']:.2f}x)")  # fmt: skip
    for count, (rps, cpu) in rows.get("replicas_rps", {}).items():
        print(f"throughput at {CLIENTS} clients through Ray Serve, {count} replica(s): {rps:.1f} requests/s; "
              f"CPU ms a request: {cpu}")  # fmt: skip
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
