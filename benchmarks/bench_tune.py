"""A tune iteration's wall time on 1, 2 and 4 simulated nodes against a model server with a model's latency, and
whether the proposer waits for evaluations it does not need.

The world: sums in a task file, checked and graded by functions of this file (as ``redraft tune --tasks --check
--grade`` runs them); every sum is 7, and a reply passes when it gives it in a field ``[[ ## sum ## ]]``. The
drafter and the critic are ``fake_http_model.py``'s server (its own process, ``--latency`` a request, 0.4 s by
default; response cache off), which answers ``Answer: 7`` unless the system prompt lists output fields in DSPy's
chat form, which it then fills, as a model following its prompt would. A failed check states that rule. The
proposer is a function in this process that sleeps ``--proposer-latency`` (2 s by default, a model writing an
edit) and adds the rule to ``draft_system`` when the feedback it reads states it, else a harmless sentence;
``draft_system`` and ``draft_task`` are edited in turn. So iteration 0 finds the rule (its child is kept and scored
on validation), later ones change nothing, and the verdict reads the test split and says significant: the same
work in every layout, but where ``--parallel`` starts an iteration before the one that found the rule has ended
(at 4, iteration 2 draws its parent from the start too and finds the rule again: one more validation). Each
evaluation is one draft per task (``best_of_n``, one sample, one round, as the tune guide advises: no critic call).

One ``ray.cluster_utils.Cluster`` of 1-CPU nodes, grown to each layout's nodes, and one tune on it per layout
(joined by ``address``): ``--parallel 1`` on 1 node, the baseline, then ``--parallel 2`` on 2 nodes and 4 on 4
(``--layouts``). Printed, with ratios to the baseline measured in the same run: the search's wall time per
iteration (from the call to the verdict's first evaluation, the start's validation included) and the verdict's
(its two test evaluations); an evaluation's median wall, its start-up (from its run opening to its first task
done, one model call included) and the actors it started; the proposer's calls: the share of their time while
evaluations of other iterations ran, and the gap from the end of the evaluation a call reads (the parent on its
minibatch) to the call, against an evaluation's length (a proposer that waited on another evaluation would show
one there). Each row comes with how busy the machine's CPU was meanwhile (``/proc/stat``): near 100 %, the
machine, not the spread, bounds the time. Nothing is written into the repository (the tunes run in a temporary
directory).

Run: ``python benchmarks/bench_tune.py`` (``--iterations N``, ``--tasks N``, ``--minibatch N``, ``--latency S``,
``--proposer-latency S``, ``--layouts 1:1,2:2,4:4``; ``--quick``: 2 iterations, 20 tasks, 1 and 2 nodes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # fake_http_model, bench_plan_steps
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import fake_http_model
from bench_plan_steps import busy, used  # the machine's CPU, read as that benchmark reads it

from redraft import RunConfig, TuneHooks, TunePlugins, TuneSettings, tune
from redraft.protocols.tuning import Proposal, ProposeRequest
from redraft.tuning._journal import TuneJournal

RULE = "Your output fields are:\n1. `sum` (int)\nEnd your reply with [[ ## completed ## ]]."
"""What the check asks for: the output fields in DSPy's chat form, the one instruction the fake server follows."""
_FIELD = re.compile(r"\[\[ ## sum ## \]\]\s*(-?\d+)")
SEED = 0


def write_tasks(path: Path, count: int) -> Path:
    """``count`` sums, each of 7, each asked in other words (tasks asking the same thing share a split)."""
    lines = []
    for i in range(count):
        a = 3 + i
        lines.append(json.dumps({"id": f"sum-{i:03d}", "prompt": f"Add {a} and {7 - a}.", "reference": {"sum": 7}}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def check(text: str, data: dict[str, Any]) -> tuple[float, str]:
    """The feedback: whether the reply gives the sum in its field, and if not, the rule that asks for it."""
    if _FIELD.search(text):
        return 1.0, "the reply gives the sum in its field"
    return 0.0, "the reply gives no sum field. " + RULE


def grade(text: str, data: dict[str, Any]) -> bool:
    """Held out: the field holds the task's sum."""
    found = _FIELD.search(text)
    return found is not None and int(found.group(1)) == int(data["sum"])


class Proposer:
    """The proposer: ``latency_s`` of thinking, then the rule the failed checks state (in ``draft_system``, where it
    is not yet), else a harmless sentence. Records each call's iteration, start and end."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.calls: list[tuple[int, float, float]] = []
        self._lock = threading.Lock()

    def __call__(self, request: ProposeRequest) -> Proposal:
        started = time.monotonic()
        time.sleep(self.latency_s)
        said = [f.detail for e in request.examples for f in e.failures]
        if request.section == "draft_system" and any(RULE in d for d in said) and RULE not in request.text:
            text, reason = f"{request.text}\n{RULE}", "the checks ask for a sum field"
        else:
            text, reason = f"{request.text}\nBe exact (edit {request.seed % 1000}).", "clarify"
        with self._lock:
            self.calls.append((request.seed - SEED * 1_000_003, started, time.monotonic()))
        return Proposal(section=request.section, text=text, reason=reason)


class Clock:
    """Each evaluation's (start, first task done, last task done, tasks), by its label ``c<k> on <set>``."""

    def __init__(self) -> None:
        self.spans: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def on_start(self, label: str, total: int, done: int) -> None:
        with self._lock:
            self.spans[label] = [time.monotonic(), 0.0, 0.0, 0]

    def on_result(self, label: str, result: Any) -> None:
        now = time.monotonic()
        with self._lock:
            span = self.spans[label]
            span[1] = span[1] or now
            span[2] = now
            span[3] += 1


def overlap(interval: tuple[float, float], others: list[tuple[float, float]]) -> float:
    """Seconds of ``interval`` covered by the union of ``others``."""
    start, end = interval
    cuts = sorted((max(s, start), min(e, end)) for s, e in others if e > start and s < end)
    covered, reach = 0.0, start
    for s, e in cuts:
        if e > reach:
            covered += e - max(s, reach)
            reach = e
    return covered


def actors_started() -> int:
    """Actors this driver's Ray job has started, dead ones included (Ray's control store); -1 where it cannot say."""
    try:
        import ray
        import ray._private.state

        return len(ray._private.state.actors(job_id=ray.JobID.from_hex(ray.get_runtime_context().get_job_id())))
    except Exception:
        return -1


def resize(cluster: Any, nodes: int) -> None:
    """Add 1-CPU nodes to ``cluster``, or remove its latest ones, until it has ``nodes``."""
    while len(cluster.list_all_nodes()) < nodes:
        cluster.add_node(num_cpus=1)
    while len(cluster.list_all_nodes()) > nodes:
        cluster.remove_node(cluster.list_all_nodes()[-1])
    cluster.wait_for_nodes()


def one_tune(url: str, cluster: Any, parallel: int, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """One tune of the sums on ``cluster``, ``parallel`` iterations at once: its figures."""
    import ray

    nodes = len(cluster.list_all_nodes())
    try:
        spec = f"openai-compatible:fake@{url}/v1"
        config = RunConfig.build(
            tasks=str(write_tasks(folder / "tasks.jsonl", args.tasks)), strategy="best_of_n", samples=1,
            max_rounds=1, drafter=spec, critic=spec, cache=False, seed=SEED, address=cluster.address,
            out=str(folder / "tune"),
        )  # fmt: skip
        settings = TuneSettings(
            sections=["draft_system", "draft_task"],
            minibatch=args.minibatch,
            max_proposals=args.iterations,
            parallel=parallel,
        )
        proposer, clock = Proposer(args.proposer_latency), Clock()
        fake_http_model.reset(url)
        start_cpu = busy()
        started = time.monotonic()
        plugins = TunePlugins(check=check, grade=grade, proposer=proposer)
        done = tune(config, settings, plugins, TuneHooks(on_start=clock.on_start, on_result=clock.on_result))
        ended = time.monotonic()
        cpu = used(start_cpu)
        calls = int(fake_http_model.stats(url)["count"])
        actors = actors_started()  # tune joined the cluster: a Ray job of its own
    finally:
        ray.shutdown()
    assert done.verdict is not None
    journal = TuneJournal(done.out)
    spans = {label: span for label, span in clock.spans.items() if span[3]}
    tests = [span[0] for label, span in spans.items() if label.endswith(" on test")]
    verdict_from = min(tests) if tests else ended
    iterations = len(journal.iterations)
    lengths = [span[2] - span[0] for span in spans.values()]
    warm_up = [span[1] - span[0] for span in spans.values()]
    gaps, covered, thinking = [], 0.0, 0.0
    for k, call_start, call_end in proposer.calls:
        read = f"{journal.iterations[k].parent} on minibatch-{k}"
        mine = {read, f"c{k + 1} on minibatch-{k}", f"c{k + 1} on validation"}
        gaps.append(call_start - spans[read][2])
        others = [(span[0], span[2]) for label, span in spans.items() if label not in mine]
        covered += overlap((call_start, call_end), others)
        thinking += call_end - call_start
    return {
        "nodes": nodes,
        "parallel": parallel,
        "iterations": iterations,
        "evaluations": len(spans),
        "kept": sum(i.kept for i in journal.iterations.values()),
        "verdict": done.verdict.says,
        "model_calls": calls,
        "actors_per_evaluation": actors / len(spans) if actors >= 0 else None,
        "search_s": verdict_from - started,
        "per_iteration_s": (verdict_from - started) / max(iterations, 1),
        "verdict_s": ended - verdict_from,
        "total_s": ended - started,
        "evaluation_median_s": statistics.median(lengths),
        "start_up_median_s": statistics.median(warm_up),
        "proposer_overlapped": covered / thinking if thinking else 0.0,
        "gap_median_s": statistics.median(gaps) if gaps else 0.0,
        "gap_max_s": max(gaps, default=0.0),
        "cpu_busy": cpu,
    }


def ratio(figure: float, baseline: float) -> str:
    return f"{figure / baseline:.2f}x" if baseline > 0 else "-"


def main() -> None:
    from ray.cluster_utils import Cluster

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=4, help="proposals (iterations) per tune")
    parser.add_argument("--tasks", type=int, default=40, help="sums, split 0.4 / 0.3 / 0.3")
    parser.add_argument("--minibatch", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.4, help="the server's seconds per request")
    parser.add_argument("--proposer-latency", type=float, default=2.0, help="the proposer's seconds per edit")
    parser.add_argument("--layouts", default="1:1,2:2,4:4", help="NODES:PARALLEL,...; the first is the baseline")
    parser.add_argument("--quick", action="store_true", help="2 iterations, 20 tasks, layouts 1:1,2:2")
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.tasks, args.minibatch, args.layouts = 2, 20, 4, "1:1,2:2"
    layouts = [tuple(int(n) for n in pair.split(":")) for pair in args.layouts.split(",")]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    rows: list[dict[str, Any]] = []
    with fake_http_model.serve_in_background(args.latency) as (url, _):  # forked before Ray starts anything
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        try:
            for nodes, parallel in layouts:
                resize(cluster, nodes)
                with tempfile.TemporaryDirectory() as folder:
                    rows.append(one_tune(url, cluster, parallel, args, Path(folder)))
                print(f"({nodes} node(s), --parallel {parallel}: {rows[-1]['total_s']:.0f} s)", file=sys.stderr)
        finally:
            cluster.shutdown()
    base = rows[0]
    print(f"# {date.today()}, {platform.machine()}, {os.cpu_count()} cores, load average {load:.1f} at the start: "
          f"tune of {args.tasks} sums, {args.iterations} proposals, minibatch {args.minibatch}, "
          f"{args.latency * 1000:.0f} ms a model call, {args.proposer_latency:g} s a proposal")  # fmt: skip
    names = [f"{row['nodes']} node(s), --parallel {row['parallel']}" for row in rows]
    print(f"{'':26} {'s per iteration':>15} {'verdict s':>13} {'evaluations':>13} {'model calls':>11} {'CPU busy':>8}")
    for name, row in zip(names, rows, strict=True):
        per, verdict = row["per_iteration_s"], row["verdict_s"]
        print(
            f"{name:26} {per:6.1f} ({ratio(per, base['per_iteration_s'])}) {verdict:5.1f} "
            f"({ratio(verdict, base['verdict_s'])}) {row['evaluations']:>5} ({row['kept']} kept) "
            f"{row['model_calls']:>11} {row['cpu_busy']:>8.0%}"
        )
    print(f"{'':26} {'evaluation s':>12} {'start-up s':>10} {'actors':>6}   "
          f"{'proposer beside others':>22} {'gap to it s, median / max':>25}")  # fmt: skip
    for name, row in zip(names, rows, strict=True):
        actors = row["actors_per_evaluation"]
        print(
            f"{name:26} {row['evaluation_median_s']:>12.1f} {row['start_up_median_s']:>10.1f} "
            f"{'?' if actors is None else f'{actors:.1f}':>6}   {row['proposer_overlapped']:>22.0%} "
            f"{row['gap_median_s']:>16.2f} / {row['gap_max_s']:.2f}"
        )
    print(json.dumps({"settings": vars(args), "load_average": load, "layouts": rows}))


if __name__ == "__main__":
    main()
