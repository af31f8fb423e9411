"""Faults for the chaos tests and `benchmarks/chaos.py`: kill, freeze and remove what a run stands on.

The model is a real OpenAI-compatible HTTP server on 127.0.0.1 (`FakeLLMServer`)
that answers arithmetic tasks deterministically (`arithmetic_reply`: right at a
round that depends on the task, so runs mix passes, failures and several rounds)
and counts every request: what a run paid. The driver is redraft's own `run`,
in a thread of this process, joined to a `ray.cluster_utils.Cluster`; the faults
hit that cluster's processes only (found under its raylets, never by name across
the machine, where other Rays may run).
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redraft.rundir import result_records
from tests.support.fake_llm_servers import FakeLLMServer
from tests.support.replies import CRITIQUE, worked

ROLES = ("ArbiterActor", "DrafterActor", "CriticActor", "VerifierActor")


def arithmetic_reply(body: dict[str, Any]) -> str:
    """The model: a critique for a schema request, else a worked solution, right from a task-dependent round."""
    if "response_format" in body:
        return json.dumps(CRITIQUE)
    if "messages" not in body:  # a body cut short: its sender was killed mid-request
        return ""
    user = body["messages"][-1]["content"]
    prompt = user.split("\n\n")[0]
    attempt = user.count("- attempt ")
    fix_at = sum(prompt.encode()) % 4  # 3: never right within the 3 rounds of a chaos run
    return f"Step by step.\n{worked(prompt, 0 if attempt >= fix_at else 1 + attempt)}"


def arithmetic_server(latency_s: float = 0.1) -> FakeLLMServer:
    server = FakeLLMServer()
    server.reply_for = arithmetic_reply
    server.latency_s = latency_s
    return server


def run_settings(server: FakeLLMServer, out: Path, tasks: int, in_flight: int, **more: Any) -> dict[str, Any]:
    """Flat settings of a chaos run: arithmetic, K=2, 3 rounds, no response cache (every call is paid and
    counted by the server, so a replay that was not avoided shows)."""
    spec = f"openai-compatible:fake-model@{server.openai_base_url}"
    return {
        "scenario": "arithmetic",
        "drafter": spec,
        "critic": spec,
        "samples": 2,
        "max_rounds": 3,
        "seed": 7,
        "limit": tasks,
        "max_tasks_in_flight": in_flight,
        "cache": False,
        "out": str(out),
    } | more


def records(out: Path) -> dict[str, dict[str, Any]]:
    """The run's records by task; fails if a task was recorded twice."""
    lines = result_records(out)
    by_id = {r["task_id"]: r for r in lines}
    assert len(by_id) == len(lines), "a task was recorded twice"
    return by_id


RESULT_FIELDS = ("answer", "text", "score", "passed", "initial_passed", "rounds", "stop_reason", "usage")


def differences(run: dict[str, dict[str, Any]], reference: dict[str, dict[str, Any]]) -> list[str]:
    """Where ``run``'s records differ from the undisturbed ``reference`` (tasks, and fields of each)."""
    found = [f"tasks {sorted(set(run) ^ set(reference))[:5]}"] if set(run) != set(reference) else []
    for task_id, record in reference.items():
        mine = run.get(task_id, {})
        found += [f"{task_id}.{f}" for f in RESULT_FIELDS if task_id in run and mine.get(f) != record.get(f)]
    return found


def infrastructure_errors(run: dict[str, dict[str, Any]]) -> int:
    from redraft.errors import recorded_as_machinery

    return sum(
        (recorded_as_machinery(r.get("error_type")) or r.get("error_type") == "PoisonTaskError") for r in run.values()
    )


# ------------------------------------------------------------------ the cluster's processes


def raylet_pids(cluster: Any) -> list[int]:
    nodes = [cluster.head_node, *cluster.worker_nodes]
    return [node.all_processes["raylet"][0].process.pid for node in nodes if "raylet" in node.all_processes]


def children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return found


def started_at(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), None once it is gone: a pid and this name one process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == b"Z" else int(fields[19])


def under(pid: int) -> dict[int, str]:
    """Every process under ``pid`` now, with its command line."""
    found: dict[int, str] = {}
    todo = children(pid)
    while todo:
        child = todo.pop()
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                found[child] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        todo += children(child)
    return found


def command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def role_pids(cluster: Any, roles: tuple[str, ...] = ROLES) -> dict[int, str]:
    """The cluster's redraft actor processes (children of its raylets), pid -> role."""
    found: dict[int, str] = {}
    for raylet in raylet_pids(cluster):
        for pid in children(raylet):
            name = command(pid).removeprefix("ray::").split(".")[0]
            if name in roles:
                found[pid] = name
    return found


@dataclass
class Killer:
    """A thread that SIGKILLs a redraft actor process of ``cluster`` at once, then every ``every_s`` seconds:
    the roles in turn (so every role is hit), a random process of the role each time. A role with no process
    now (the verifier of instant checks runs inside the arbiter; a member restarting) is passed over within the
    same turn, so each turn kills one process if any of ``roles`` runs. Processes in ``spared`` (those of an
    earlier run, still going) are never hit."""

    cluster: Any
    every_s: float
    roles: tuple[str, ...] = ROLES
    most: int = 1000
    rng: random.Random = field(default_factory=lambda: random.Random(1))
    spared: set[int] = field(default_factory=set)
    kills: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Killer:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        turn = 0
        while len(self.kills) < self.most:
            running = {pid: role for pid, role in role_pids(self.cluster, self.roles).items() if pid not in self.spared}
            for _ in self.roles:
                role = self.roles[turn % len(self.roles)]
                turn += 1
                if self._kill_one(sorted(pid for pid, r in running.items() if r == role), role):
                    break
            if self._stop.wait(self.every_s):
                return

    def _kill_one(self, victims: list[int], role: str) -> bool:
        if not victims:
            return False
        try:
            os.kill(self.rng.choice(victims), signal.SIGKILL)
        except ProcessLookupError:
            return False
        self.kills.append(role)
        return True


def in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``target`` in a thread; its return value or exception lands in the dict."""
    box: dict[str, Any] = {}

    def main() -> None:
        try:
            box["value"] = target()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    return thread, box


def lines(path: Path) -> int:
    return (
        sum(1 for line in path.read_bytes().splitlines(keepends=True) if line.endswith(b"\n")) if path.exists() else 0
    )


def wait_for(predicate: Callable[[], bool], timeout_s: float, poll_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll_s)
    return predicate()
