"""``run``: a scenario's tasks refined on Ray, written to a run directory, resumable.

The driver only dispatches and writes: tasks are read lazily, at most
``max_tasks_in_flight`` are out at once (`redraft.actors._dispatcher`), and each
finished task's frames and result are appended to the run directory as it lands
(the driver is its single writer). It keeps nothing per task beyond the ones in
flight, so its memory stays flat however long the run
(``benchmarks/bench_batch.py`` measures it).

The run's actors are its share of a `redraft.actors._fleet.Fleet` (`redraft.actors._leases`), kept whole
while the run lasts; a fleet of its own is killed when the run ends, however it ends, and one shared with the
other runs of a command (a tune's evaluations, a comparison's lanes) when that command ends, so no call of the
run goes on after it.
A driver killed outright takes them with it: on a cluster Ray ends a dead job's
actors at once; a local Ray started here (`redraft.actors._startup`) dies with this
process, its workers stop as their raylet goes (`redraft.actors._ray.die_with_raylet`),
and a watcher ends the rest at once (`redraft.actors._reaper`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from redraft.actors._preflight import estimate_left
from redraft.actors._running import RunHooks, start_running
from redraft.actors._startup import check_address, ensure_ray
from redraft.config import RunConfig
from redraft.engine import Plugins, check_out
from redraft.engine.estimate import Estimate
from redraft.engine.resolution import BackendOverrides, ResolvedRun, resolve_run
from redraft.errors import Interrupted, UserError
from redraft.protocols.messages import Task
from redraft.rundir import RunSecret, RunStore, Summary
from redraft.rundir.layout import RAY_LOG
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


def run(config: RunConfig, plugins: Plugins | None = None, hooks: RunHooks | None = None) -> RunOutcome:
    """Run the config's scenario on Ray (joining ``runtime.address`` or starting a local Ray), writing its run
    directory; run it again with the same ``out`` to resume.

    ``plugins``: the functions that steer and grade a task file's tasks, and backend objects in place of the
    config's models (`Plugins`; None plugs in nothing). ``hooks``: what the run tells the caller as it goes, the
    event that stops it, and the fleets of the command it is one of (`RunHooks`; None: a fresh one, so that no
    two calls share a stop event). A config with ``dry_run`` set is refused: call `estimate`.

        >>> import tempfile
        >>> from redraft import Plugins, RunConfig, run
        >>> from redraft.backends.scripted import ScriptedSpec
        >>> model = ScriptedSpec(script=lambda request: "3 + 4 = 7\\nAnswer: 7")
        >>> config = RunConfig.build(scenario="arithmetic", limit=2, samples=1, out=tempfile.mkdtemp())
        >>> outcome = run(config, Plugins(backends={"drafter": model, "critic": model}))
        >>> outcome.summary.tasks, outcome.total
        (2, 2)
    """
    plugged = plugins or Plugins()
    resolved = resolve_run(config, check=plugged.check, grade=plugged.grade, backends=plugged.backends)
    return run_resolved(resolved, hooks or RunHooks())


def run_resolved(run: ResolvedRun, hooks: RunHooks) -> RunOutcome:
    """`run`, of a run resolved once (`redraft.engine.resolution.resolve_run`): a comparison's lane, a tune's
    evaluation, served by the command's fleets (`RunHooks.fleets`)."""
    if run.runtime.dry_run:
        raise UserError("a dry run starts nothing: redraft.estimate(config) is its estimate")
    check_out(run.out)
    if run.runtime.otel is not None:  # the endpoint's URL and the extra, before anything starts
        traces_url(run.runtime.otel)
        sdk()
    manifest = run.manifest()
    if hooks.on_estimate is not None:
        hooks.on_estimate(estimate_left(run, manifest))
    check_address(run.runtime.address)
    store = _opened(run, manifest)
    try:  # the directory is held from here: released however the run ends
        total, skipped = _counted(run.tasks(), store.done)
        if hooks.on_start is not None:
            hooks.on_start(total, skipped)
        started = time.monotonic()
        if skipped == total:  # a finished run, resumed (a comparison's finished lane): no actor to start
            return RunOutcome(out=run.out, summary=store.finish(0.0, None), total=total, skipped=skipped)
        pending = (t for t in run.tasks() if t.task_id not in store.done)
        ensure_ray(run.runtime.address, log=run.out / RAY_LOG, verbose=run.runtime.verbose)
        running = start_running(run, store, manifest, started, hooks)
    except BaseException:
        store.close()
        raise
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
    return RunOutcome(out=run.out, summary=summary, total=total, skipped=skipped)


def _opened(run: ResolvedRun, manifest: dict[str, object]) -> RunStore:
    """The run directory, opened for writing: recovered first if damaged, and what that set aside said."""
    store = RunStore.open(run.out, manifest, redo_untraced=run.runtime.redo_untraced)
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
    out = Path(config.runtime.out) if config.runtime.out else None  # nothing written: a secret kept is read
    secret = RunSecret(out, keep=False)
    resolved = resolve_run(config, check=check, grade=grade, backends=backends, secret=secret)
    check_out(resolved.out)
    return estimate_left(resolved, resolved.manifest())
