"""The faults of the issue "surviving a Ray cluster", measured the same way, and the table printed.

A 3-node `ray.cluster_utils.Cluster`, a fake OpenAI-compatible server at 100 ms
(tests/support/chaos.py: deterministic arithmetic answers, every request counted), 320
arithmetic tasks, 32 in flight, K=2, 3 rounds, no response cache (so every call
the faults made the run repeat is paid and counted). Each disturbed run is
compared task by task with an undisturbed run of the same seed.

    .venv/bin/python benchmarks/chaos.py [--tasks 320] [--in-flight 32] [--only damage|journal|storm]
        [--batch-tasks 40] [--storm-every 1.5]

Columns: tasks recorded (and whether each exactly once), tasks recorded with the
machinery's failure as their result (must be 0), tasks redone, paid replays
(requests beyond the undisturbed run's), whether every result equals the
undisturbed one, and the run's wall time against the undisturbed run's. A fault
that kills goes on only while the run does (the wall time is the run's own, from
its start to its return), and the row says how many kills it made. After each kill
of the command's own driver, it says how long the processes of its local Ray lived on.
undisturbed one, and wall time.

The storm row SIGKILLs a role actor (arbiters, drafters, critics, verifiers in turn, a random process of the
role each time) every ``--storm-every`` seconds from the run's first written task to its end (the row
"while the fleet starts" hits the start): every task must be done once,
none failed for infrastructure, within 3x the undisturbed time. ``--only storm`` runs the undisturbed run and
this row only.

Then a damaged run directory: a copy of the undisturbed run's, damaged as a crashed
machine or a careless operator would (tests/support/damage.py), resumed: the tasks
kept, the tasks redone, the requests paid again (beyond the damaged records' own calls,
which a lost record must cost: 0), and the lines the resume said. And a damaged batch
journal: ``--batch`` runs of the CLI against the same kind of server speaking OpenAI's
batch API, the driver SIGKILLed while its first batch is out, the journal then torn or
deleted, and the run resumed: the batch lines billed (every line of every batch sent),
against an undisturbed ``--batch`` run's. ``--only damage`` runs the undisturbed run and
these rows only; ``--only journal`` the batch journal's rows alone.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_enable_worker_prestart", "0")

from tests.support.chaos import (
    ROLES,
    Killer,
    arithmetic_reply,
    arithmetic_server,
    differences,
    in_thread,
    infrastructure_errors,
    lines,
    records,
    role_pids,
    run_settings,
    started_at,
    under,
    wait_for,
)
from tests.support.damage import DAMAGES, damage, tear_journal
from tests.support.fake_llm_servers import FakeLLMServer

Fault = Callable[[Callable[[], bool], set[int]], str]
"""A fault, given whether the run still goes on and the actor processes of earlier runs (still ending, to be
left alone); what it did, for the row."""

ROWS: list[tuple[str, str]] = []


def row(fault: str, outcome: str) -> None:
    ROWS.append((fault, outcome))
    print(f"| {fault} | {outcome} |", flush=True)


def judge(out: Path, reference: dict[str, Any], requests: int, wall: float, tasks: int, did: str = "") -> str:
    try:
        recs = records(out)
        once = "once each"
    except AssertionError:
        return "a task was recorded twice"
    redone = sum(r.get("attempts", 1) > 1 for r in recs.values())
    same = "equal to undisturbed" if not differences(recs, reference["records"]) else "DIFFERS from undisturbed"
    replays = requests - reference["requests"]
    ratio = f" ({wall / reference['wall']:.1f}x undisturbed)" if reference.get("wall") else ""
    return (
        f"{did + ': ' if did else ''}{len(recs)}/{tasks} recorded {once}, {infrastructure_errors(recs)} "
        f"infrastructure errors, {redone} redone, {replays} paid replays, {same}, {wall:.1f} s{ratio}"
    )


def disturbed(cluster: Any, server: Any, settings: dict[str, Any], fault: Fault, at: int) -> tuple[float, int, str]:
    """The run in a thread, ``fault`` called once ``at`` tasks are written: the run's own wall time, the
    requests it made, and what the fault did."""
    from redraft import RunConfig, run

    out = Path(settings["out"])
    earlier = set(role_pids(cluster))
    before, started, ended = len(server.requests), time.monotonic(), []

    def timed() -> Any:
        try:
            return run(RunConfig.build(**settings))
        finally:
            ended.append(time.monotonic())

    thread, box = in_thread(timed)
    wait_for(lambda: lines(out / "results.jsonl") >= at or not thread.is_alive(), 300)
    did = fault(thread.is_alive, earlier)
    thread.join(timeout=900)
    if thread.is_alive():
        raise SystemExit("the run hung")
    if "error" in box:
        raise box["error"]
    return ended[0] - started, len(server.requests) - before, did


def killing(
    cluster: Any, roles: tuple[str, ...], most: int, every_s: float = 2.0, until: Any = None, for_s: float = 600
) -> Fault:
    """SIGKILL ``most`` processes of ``roles`` (in turn, every ``every_s``) while the run goes on and ``until()``
    is not yet true (``for_s`` at most); the processes of earlier runs are spared."""

    def fault(running: Callable[[], bool], spared: set[int]) -> str:
        with Killer(cluster, every_s=every_s, roles=roles, most=most, spared=spared) as killer:
            wait_for(lambda: len(killer.kills) >= most or not running() or (until is not None and until()), for_s)
        counted = ", ".join(f"{n} {role}" for role in roles if (n := killer.kills.count(role)))
        return f"{len(killer.kills)} kills ({counted})"

    return fault


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=320)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument(
        "--only",
        choices=("all", "damage", "journal", "storm"),
        default="all",
        help="all rows, the damaged run directory's and batch journal's, the batch journal's alone, or the storm's",
    )
    parser.add_argument("--storm-every", type=float, default=1.5, help="seconds between the storm's kills")
    parser.add_argument("--batch-tasks", type=int, default=40, help="tasks of the damaged batch journal's runs")
    args = parser.parse_args()
    if args.only == "journal":  # no cluster: these runs are the CLI's, each on its own local Ray
        print("| fault | after the change |\n|---|---|")
        for fault, outcome in damaged_journals(Path(tempfile.mkdtemp(prefix="redraft-chaos-")), args.batch_tasks):
            row(fault, outcome)
        return
    import ray
    from ray.cluster_utils import Cluster

    from redraft import RunConfig, run

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    worker = cluster.add_node(num_cpus=1)
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    root = Path(tempfile.mkdtemp(prefix="redraft-chaos-"))
    n, k = args.tasks, args.in_flight

    def settings(name: str, **more: Any) -> dict[str, Any]:
        return run_settings(server, root / name, n, k, **more)

    with arithmetic_server(latency_s=0.1) as server:
        started = time.monotonic()
        run(RunConfig.build(**settings("reference")))
        reference: dict[str, Any] = {"records": records(root / "reference"), "requests": len(server.requests)}
        reference["wall"] = time.monotonic() - started
        passed = sum(r["passed"] for r in reference["records"].values())
        print(
            f"undisturbed: {n} tasks, {passed} passed, {reference['requests']} requests, "
            f"{reference['wall']:.1f} s\n\n| fault | after the change |\n|---|---|"
        )

        if args.only in ("all", "storm"):
            kill = killing(cluster, ROLES, 10**6, every_s=args.storm_every, for_s=3600)
            wall, req, did = disturbed(cluster, server, settings("storm"), kill, at=1)
            storm = f"role actors SIGKILLed every {args.storm_every:g} s, from the first task written to the end"
            row(storm, judge(root / "storm", reference, req, wall, n, did))
        if args.only == "all":
            cluster_faults(cluster, worker, server, root, settings, reference, n)
        if args.only != "storm":
            for how in DAMAGES:
                row(f"{how}, then resumed", damaged_directory(root, how, server, settings, reference, n))
            for fault, outcome in damaged_journals(root, args.batch_tasks):
                row(fault, outcome)
    ray.shutdown()
    cluster.shutdown()
    print("\n" + "\n".join(f"| {f} | {o} |" for f, o in ROWS))


def cluster_faults(
    cluster: Any,
    worker: Any,
    server: Any,
    root: Path,
    settings: Callable[..., dict[str, Any]],
    reference: dict[str, Any],
    n: int,
) -> None:
    """The rows of the faults a cluster does to a run."""
    from redraft import RunConfig, run
    from redraft.errors import ClusterError

    first = root / "start" / "results.jsonl"
    kill = killing(cluster, ROLES, 6, every_s=0.5, until=lambda: lines(first) > 0)
    wall, req, did = disturbed(cluster, server, settings("start"), kill, at=0)
    row("role actors SIGKILLed while the fleet starts", judge(root / "start", reference, req, wall, n, did))
    kill = killing(cluster, ("ArbiterActor",), 7)
    wall, req, did = disturbed(cluster, server, settings("arbiters"), kill, at=n // 10)
    row("arbiter processes SIGKILLed during the run", judge(root / "arbiters", reference, req, wall, n, did))
    kill = killing(cluster, ("DrafterActor", "CriticActor", "VerifierActor"), 9)
    wall, req, did = disturbed(cluster, server, settings("roles"), kill, at=n // 10)
    row("drafter/critic/verifier kills during the run", judge(root / "roles", reference, req, wall, n, did))

    def remove(running: Callable[[], bool], earlier: set[int]) -> str:
        cluster.remove_node(worker)
        return "removed"

    wall, req, _ = disturbed(cluster, server, settings("node"), remove, at=63)
    row("a worker node removed at 63 tasks done", judge(root / "node", reference, req, wall, n))
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()

    redo = sum(infrastructure_errors(records(root / name)) for name in ("arbiters", "roles", "node"))
    before, t0 = len(server.requests), time.monotonic()
    again = run(RunConfig.build(**settings("node")))
    row(
        "rerun with the same --out",
        f"{redo} infrastructure records to redo; {again.skipped}/{n} skipped as done, "
        f"{len(server.requests) - before} requests, {time.monotonic() - t0:.0f} s",
    )

    server.fail_status, t0 = 500, time.monotonic()
    try:
        run(RunConfig.build(**settings("down")))
        outcome = "the run did not stop"
    except ClusterError as exc:
        outcome = f"exit 1 after {time.monotonic() - t0:.0f} s, one line: {str(exc)[:90]}..."
    server.fail_status = None
    written = lines(root / "down" / "results.jsonl")
    before, t0 = len(server.requests), time.monotonic()
    run(RunConfig.build(**settings("down")))
    resumed = judge(root / "down", reference, len(server.requests) - before, time.monotonic() - t0, n)
    row(
        "a server down for good (every request 500)",
        f"{outcome}; {written} tasks written as failed; restored, the rerun resumes: {resumed}",
    )

    for role in ("DrafterActor", "ArbiterActor"):

        def freeze(running: Callable[[], bool], earlier: set[int], role: str = role) -> str:
            pid = min(p for p, r in role_pids(cluster).items() if r == role)
            os.kill(pid, signal.SIGSTOP)
            return "frozen"

        name = f"frozen-{role.lower()}"
        wall, req, _ = disturbed(cluster, server, settings(name, task_timeout=20), freeze, at=n // 5)
        row(
            f"a {role.lower()} process frozen (SIGSTOP), --task-timeout 20",
            judge(root / name, reference, req, wall, n),
        )

    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "redraft.cli", "run", "arithmetic", "--limit", "1", "--address", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    row(
        "--address 127.0.0.1:1 (nothing there)",
        f"exit {done.returncode} after {time.monotonic() - t0:.1f} s: {done.stderr.strip()[:100]}",
    )

    row("driver SIGKILLed, 3 times, then resumed", driver_kills(server, settings("driver"), reference, n))


def damaged_directory(
    root: Path, how: str, server: Any, settings: Callable[..., dict[str, Any]], reference: dict[str, Any], n: int
) -> str:
    """A copy of the undisturbed run directory, damaged, then resumed: kept, redone, paid again, said."""
    from redraft import RunConfig, run
    from redraft.rundir import RunReader

    out = root / f"damaged-{how.replace(' ', '-')}"
    shutil.copytree(root / "reference", out)
    lost = damage(out, how)
    said = _Said()
    logging.getLogger("redraft.actors.driver").addHandler(said)
    before, t0 = len(server.requests), time.monotonic()
    try:
        outcome = run(RunConfig.build(**settings(out.name)))
    finally:
        logging.getLogger("redraft.actors.driver").removeHandler(said)
    paid, wall = len(server.requests) - before, time.monotonic() - t0
    recs = records(out)
    own = sum(recs[task]["usage"]["calls"] for task in lost)
    untraced = sum(1 for _, frames in RunReader(out).tasks() if not frames)
    same = "equal to undisturbed" if not differences(recs, reference["records"]) else "DIFFERS from undisturbed"
    return (
        f"{outcome.skipped}/{n} kept ({untraced} with their trace lost), {n - outcome.skipped} redone, "
        f"{paid} requests paid again ({paid - own} beyond the {len(lost)} damaged record(s)' own), {same}, "
        f"{wall:.0f} s; said: {' / '.join(said.lines) or 'nothing'}"
    )


class _Said(logging.Handler):
    """The lines a resume says of what it set aside."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def damaged_journals(root: Path, tasks: int) -> list[tuple[str, str]]:
    """``--batch`` runs of the CLI against a server speaking OpenAI's batch API: one undisturbed; then, for each
    damage, one whose driver is SIGKILLed while its first batch is out, its journal torn or deleted, then resumed.
    The batch lines each billed, against the undisturbed run's."""
    rows = []
    with FakeLLMServer() as server:
        server.reply_for, server.model = arithmetic_reply, "gpt-4o-mini"
        env = os.environ | {
            "OPENAI_BASE_URL": server.openai_base_url,
            "OPENAI_API_KEY": "not-a-real-key",
            "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
        }

        def command(out: Path) -> list[str]:
            flags = ["--model", "openai:gpt-4o-mini", "--batch", "--no-cache", "--samples", "2", "--max-rounds", "3"]
            where = ["--seed", "7", "--limit", str(tasks), "--out", str(out)]
            return [sys.executable, "-m", "redraft.cli", "run", "arithmetic", *flags, *where]

        subprocess.run(command(root / "batch-reference"), env=env, capture_output=True, timeout=1800)
        undisturbed = billed(server.batches)
        for how in ("torn", "deleted"):
            first, out = len(server.batches), root / f"batch-{how}"
            server.batch_hold = True
            proc = subprocess.Popen(command(out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            journal = out / "batches.jsonl"
            wait_for(
                lambda j=journal, p=proc: (j.exists() and b"submitted" in j.read_bytes()) or p.poll() is not None, 600
            )
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            time.sleep(5)  # its local Ray and actors go with it (within 0.5 s: the driver row measures it)
            if how == "torn":
                tear_journal(out)
            else:
                journal.unlink()
            server.batch_hold = False
            done = subprocess.run(command(out), env=env, capture_output=True, text=True, timeout=1800)
            sent = [custom_id for batch in server.batches[first:] for custom_id in batch.custom_ids]
            twice = len(sent) - len(set(sent))
            found = "found in the provider's list" if "provider's list" in done.stderr else "NOT looked up"
            rows.append(
                (
                    f"the batch journal {how} after a driver kill, then resumed",
                    f"exit {done.returncode}; {billed(server.batches[first:])} batch lines billed against "
                    f"{undisturbed} undisturbed, {twice} calls sent twice, {len(server.requests)} online requests; "
                    f"the open batch {found}",
                )
            )
    return rows


def billed(batches: list[Any]) -> int:
    """The lines a provider bills for ``batches``: every line of a batch it ran (none was cancelled here), whether
    or not anyone read its results (the fake answers a batch only once asked about it, a provider does not wait)."""
    return sum(len(batch.custom_ids) for batch in batches if not batch.cancelled)


def driver_kills(server: Any, settings: dict[str, Any], reference: dict[str, Any], n: int) -> str:
    """The CLI on its own local Ray, SIGKILLed at three points, then resumed; requests after each kill."""
    out = Path(settings["out"])
    spec = settings["drafter"]
    argv = [
        sys.executable,
        "-m",
        "redraft.cli",
        "run",
        "arithmetic",
        "--drafter",
        spec,
        "--critic",
        spec,
        "--samples",
        "2",
        "--max-rounds",
        "3",
        "--seed",
        "7",
        "--limit",
        str(n),
        "--max-tasks-in-flight",
        str(settings["max_tasks_in_flight"]),
        "--no-cache",
        "--out",
        str(out),
    ]
    before, started, after_kill, lived = len(server.requests), time.monotonic(), [], []
    for at in (n // 8, n // 3, 2 * n // 3):
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seen = watched(proc, lambda at=at: lines(out / "results.jsonl") >= at)
        proc.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        proc.wait()
        lived.append(lived_on(seen, killed_at))
        time.sleep(max(0.0, killed_at + 5 - time.monotonic()))
        after_kill.append(sum(r.arrived > killed_at + 0.5 for r in server.requests[before:]))
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = watched(proc, lambda: False)
    code, ended_at = proc.wait(), time.monotonic()
    verdict = judge(out, reference | {"wall": None}, len(server.requests) - before, time.monotonic() - started, n)
    return (
        f"exit {code}; {verdict}; requests later than 0.5 s after each kill: {after_kill}; its local Ray's "
        f"processes lived on {', '.join(f'{s:.1f}' for s in lived)} s after each kill, "
        f"{lived_on(seen, ended_at):.1f} s after the end"
    )


def watched(proc: subprocess.Popen[bytes], until: Callable[[], bool]) -> dict[int, tuple[int | None, str]]:
    """Every process under ``proc`` (its local Ray's) while it runs and ``until()`` is false, with its start."""
    seen: dict[int, tuple[int | None, str]] = {}
    while proc.poll() is None and not until():
        now = under(proc.pid).items()
        seen |= {pid: (seen.get(pid, (started_at(pid), ""))[0], name) for pid, name in now if name}
        time.sleep(0.05)
    return seen


def lived_on(seen: dict[int, tuple[int | None, str]], since: float, most_s: float = 180.0) -> float:
    """Seconds from ``since`` until none of the processes ``seen`` runs (at most ``most_s``)."""
    wait_for(lambda: all(start is None or started_at(pid) != start for pid, (start, _) in seen.items()), most_s)
    return time.monotonic() - since


if __name__ == "__main__":
    main()
