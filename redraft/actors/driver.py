"""``run``: a scenario's tasks refined on Ray, written to a run directory, resumable.

The driver only dispatches and writes: tasks are read lazily, at most
``max_tasks_in_flight`` are out at once (`redraft.actors._dispatcher`), and each
finished task's frames and result are appended to the run directory as it lands
(the driver is its single writer). It keeps nothing per task beyond the ones in
flight, so its memory stays flat however long the run
(``benchmarks/bench_batch.py`` measures it).

The run's actors are a `redraft.actors._fleet.Fleet`, kept whole while the run lasts
and killed when it ends, however it ends, so no call of the run goes on after it.
A driver killed outright takes them with it: on a cluster Ray ends a dead job's
actors at once; a local Ray started here (`redraft.actors._startup`) dies with this
process, its workers stop as their raylet goes (`redraft.actors._ray.die_with_raylet`),
and a watcher ends the rest at once (`redraft.actors._reaper`).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import os
import platform
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import msgspec

from redraft.actors._dispatcher import ProgressHook
from redraft.actors._endpoints import EndpointHook
from redraft.actors._preflight import estimate_left
from redraft.actors._running import start_running
from redraft.actors._startup import check_address, ensure_ray
from redraft.backends.pricing import load_prices
from redraft.config import RunConfig
from redraft.engine.estimate import Estimate, paid
from redraft.engine.prompt_files import fingerprinted, load_prompts, overrides
from redraft.engine.setup import (
    BackendOverrides,
    RoleSetup,
    role_setup,
    with_check,
)
from redraft.errors import Interrupted, UserError
from redraft.protocols.messages import Task
from redraft.rundir import RunStore, Summary, fingerprint
from redraft.rundir.layout import RAY_LOG
from redraft.rundir.store import new_run_uid
from redraft.scenarios import get_scenario
from redraft.scenarios.taskfile import iter_tasks, task_file_identity
from redraft.scenarios.user_check import CheckFunction
from redraft.telemetry import sdk, traces_url

log = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    out: Path
    summary: Summary
    total: int
    """Tasks in the run (done before a resume included)."""
    skipped: int
    """Tasks already finished by an earlier invocation."""


def identity(config: RunConfig) -> dict[str, Any]:
    """What decides the run's results (the fingerprint's input): the experiment, every prompt template's
    version (a prompts file's text hashes too), and a task file's path and content hash."""
    data: dict[str, Any] = msgspec.to_builtins(config.experiment)
    for optional in ("calls_per_task", "tokens_per_task", "columns"):  # absent when unset: earlier fingerprints stay
        if data.get(optional) is None:
            data.pop(optional, None)
    prompts = load_prompts(config.experiment.prompts)
    data["prompts"] = fingerprinted(prompts)  # the versions, not the file's path
    if config.experiment.prompts is not None:  # absent without one: the fingerprints of earlier runs stay as they were
        data["prompt_overrides"] = overrides(prompts)
    if config.experiment.tasks is not None:
        data["tasks"] = task_file_identity(config.experiment.tasks)
    return data


def manifest_for(config: RunConfig, run_id: str) -> dict[str, Any]:
    """The run directory's ``manifest.json``: the config (flat, without the machine's ``out`` path), its
    identity and fingerprint, package versions, start time."""
    ident = identity(config)
    return {
        "run_id": run_id,
        "run_uid": new_run_uid(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": config.flat() | {"out": None},
        "identity": ident,
        "fingerprint": fingerprint(ident),
        "versions": _versions(),
    }


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for dist in ("redraft", "ray", "msgspec", "llama_cpp_python", "openai", "anthropic"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def plan(config: RunConfig) -> tuple[Path, Callable[[], Iterator[Task]]]:
    """Where the run writes, and a way to stream its tasks."""
    experiment, limit = config.experiment, config.runtime.limit
    scenario = get_scenario(experiment.scenario)
    if experiment.tasks is None and scenario.needs_task_file:
        raise UserError(f"the scenario {experiment.scenario!r} has no tasks of its own: give --tasks FILE.jsonl")

    def tasks() -> Iterator[Task]:
        if experiment.tasks is not None:  # a task file, streamed; role_setup validated it
            return islice(iter_tasks(experiment.tasks, experiment.scenario, experiment.columns), limit)
        return islice(scenario.tasks(seed=experiment.seed), limit)

    run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    out = Path(config.runtime.out) if config.runtime.out else Path("runs") / run_id
    check_out(out)
    return out, tasks


def check_out(out: Path) -> None:
    """``--out`` is a directory redraft can write in, or a path it can create; one `UserError` line otherwise.

    Checked before anything starts: a file, a device (``/dev/null``), a directory nobody may write in
    (``/proc/self``) or a path under a file would otherwise fail only once the run directory is made.
    """
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise UserError(f"--out {out} is not a directory: give a run directory, or a path that does not exist yet")
        place = out
    else:
        place = next(p for p in out.absolute().parents if p.exists())
        if not place.is_dir():
            raise UserError(f"--out {out}: {place} is not a directory, so nothing can be made under it")
    try:  # the only test that holds for root, read-only mounts and /proc alike: write something there
        descriptor, probe = tempfile.mkstemp(dir=place, prefix=".redraft-write-test-")
        os.close(descriptor)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write in {place} ({exc.strerror}); choose another directory") from None


def run(
    config: RunConfig,
    *,
    backends: BackendOverrides | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_result: ProgressHook | None = None,
    stop: threading.Event | None = None,
    check: CheckFunction | None = None,
    grade: CheckFunction | None = None,
    on_endpoints: EndpointHook | None = None,
    cpu_share: float = 1.0,
    on_estimate: Callable[[Estimate], None] | None = None,
    on_in_flight: Callable[[int], None] | None = None,
) -> RunOutcome:
    """Run the config's scenario on Ray (joining ``runtime.address`` or starting a local Ray), writing its run
    directory; run it again with the same ``out`` to resume.

    ``on_start(total, already_done)`` is called once the run directory is open;
    ``on_result`` for each task that finishes in this invocation; ``on_endpoints`` every few seconds with the
    state of each endpoint's limiter (calls in flight, the adaptive window, throttles). Setting ``stop`` (from
    a signal handler, another thread) ends the run within a second: `Interrupted`, saying how many tasks are
    done, with the tasks in flight cancelled and not recorded. ``check`` and ``grade`` steer and grade a task
    file's tasks (``config.experiment.tasks``), as `redraft.refine`'s do. ``cpu_share``: the share of a CPU
    each actor that runs candidates reserves, when other runs share the nodes (a comparison's lanes).
    ``on_estimate`` is told the estimate of the tasks left (`estimate`) before anything starts, when a role's
    model costs money or may (one not local nor scripted); ``on_in_flight`` the tasks in flight on every turn
    of the dispatch loop. A config with ``dry_run`` set is refused: call `estimate`.

        >>> import tempfile
        >>> from redraft import RunConfig, run
        >>> from redraft.backends.scripted import ScriptedSpec
        >>> model = ScriptedSpec(script=lambda request: "3 + 4 = 7\\nAnswer: 7")
        >>> config = RunConfig.build(scenario="arithmetic", limit=2, samples=1, out=tempfile.mkdtemp())
        >>> outcome = run(config, backends={"drafter": model, "critic": model})
        >>> outcome.summary.tasks, outcome.total
        (2, 2)
    """
    config = with_check(config, check, grade)
    out, tasks = plan(config)
    setup = dataclasses.replace(role_setup(config, backends), cpu_share=cpu_share)
    if config.runtime.otel is not None:  # the endpoint's URL and the extra, before anything starts
        traces_url(config.runtime.otel)
        sdk()
    manifest = manifest_for(config, out.name)
    _estimated(config, setup, out, tasks, manifest, on_estimate)
    check_address(config.runtime.address)
    store = _opened(out, manifest, config)
    total, skipped = _counted(tasks(), store.done)
    if on_start is not None:
        on_start(total, skipped)
    started = time.monotonic()
    if skipped == total:  # a finished run, resumed (a comparison's finished lane): no actor to start
        return RunOutcome(out=out, summary=store.finish(0.0, None), total=total, skipped=skipped)
    pending = (t for t in tasks() if t.task_id not in store.done)
    ensure_ray(config.runtime.address, log=out / RAY_LOG, verbose=config.runtime.verbose)
    hooks = (on_result, on_endpoints, stop or threading.Event())
    running = start_running(config, setup, store, manifest, started, *hooks, on_in_flight)
    stopped_by: str | None = None
    try:
        stopped_by = running.dispatcher.run(pending)
    except Interrupted:
        stopped_by = "interrupted"
        done = skipped + running.dispatcher.written
        raise Interrupted(f"interrupted: {done} of {total} tasks done", done=done, total=total) from None
    finally:  # a stopped run still leaves a consistent directory and a summary of what finished
        running.stop()
        summary = store.finish(time.monotonic() - started, stopped_by)
    return RunOutcome(out=out, summary=summary, total=total, skipped=skipped)


def _opened(out: Path, manifest: dict[str, Any], config: RunConfig) -> RunStore:
    """The run directory, opened for writing: recovered first if damaged, and what that set aside said."""
    store = RunStore.open(out, manifest, redo_untraced=config.runtime.redo_untraced)
    for line in store.said:  # before "resuming: ..."
        log.warning("%s", line)
    return store


def _counted(tasks: Iterator[Task], done: set[str]) -> tuple[int, int]:
    """In one pass: how many tasks, and how many of them an earlier invocation finished."""
    total = skipped = 0
    for task in tasks:
        total += 1
        skipped += task.task_id in done
    return total, skipped


def _estimated(
    config: RunConfig,
    setup: RoleSetup,
    out: Path,
    tasks: Callable[[], Iterator[Task]],
    manifest: dict[str, Any],
    on_estimate: Callable[[Estimate], None] | None,
) -> None:
    """Tell ``on_estimate`` the estimate of the tasks left, when a role's model costs money (or may); `UserError`
    for a dry run, which starts nothing."""
    if config.runtime.dry_run:
        raise UserError("a dry run starts nothing: redraft.estimate(config) is its estimate")
    if on_estimate is not None and paid(setup, config.experiment.strategy, load_prices(config.runtime.prices)):
        on_estimate(estimate_left(config, setup, out, tasks, manifest))


def estimate(
    config: RunConfig,
    *,
    backends: BackendOverrides | None = None,
    check: CheckFunction | None = None,
    grade: CheckFunction | None = None,
) -> Estimate:
    """What `run` would spend on the config's tasks, estimated before any call: no Ray, no model, nothing written.

    The real strategy runs in this process over each task (a seeded sample of 200 of a larger run, scaled up),
    with models that call nothing and verdicts set in advance, priced by the run's price table: the worst case
    (every answer at its max tokens, the feedback never passing, every task to ``max_rounds``), the expected
    case (an assumption, or on a resume the mean real cost of the tasks done) and the case where every task
    passes its first round. `Estimate.assumptions` says how each was made; `Estimate.over_budget` says which
    run budget the worst case is over. Every name in the config is checked as `run` checks it.

        >>> from redraft import RunConfig, estimate
        >>> from redraft.backends.scripted import ScriptedSpec
        >>> model = ScriptedSpec(script=lambda request: "", model="gpt-4o-mini")  # priced as gpt-4o-mini
        >>> config = RunConfig.build(scenario="arithmetic", limit=20, samples=2, max_rounds=3)
        >>> cost = estimate(config, backends={"drafter": model, "critic": model})
        >>> cost.tasks, cost.worst.total.calls  # a round: 2 drafts and 2 critiques; the last round no critique
        (20, 200)
        >>> cost.first_pass.total.cost_usd <= cost.expected.total.cost_usd <= cost.worst.total.cost_usd
        True
    """
    config = with_check(config, check, grade)
    out, tasks = plan(config)
    setup = role_setup(config, backends)
    return estimate_left(config, setup, out, tasks, manifest_for(config, out.name))
