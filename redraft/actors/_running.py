"""What a run starts once Ray is up, and stops however the run ends: the provider batches' collectors, the
batch's ledger, its share of a fleet of actors (`redraft.actors._leases`), the dispatch loop, and the export
of the run's spans (``--otel``), which listens to the run store.

`start_running` makes them in the order they need each other; `Running.stop` ends them, the span export
last, so that the run's span closes over every task written.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from redraft.actors._attempts import Breaker
from redraft.actors._batches import Batches, start_batches, stop_batches
from redraft.actors._clock import RunClock
from redraft.actors._dispatcher import Dispatcher, DispatchRules, ProgressHook
from redraft.actors._endpoints import EndpointHook, EndpointWatch
from redraft.actors._hosts import HostWatch
from redraft.actors._leases import Fleets, Lease
from redraft.actors._ledger import batch_name, start_ledger, stop_ledger
from redraft.actors._live import LiveHook, recorded
from redraft.actors._metrics import RunMetrics
from redraft.engine.estimate import Estimate
from redraft.engine.resolution import ResolvedRun, RoleSetup
from redraft.rundir import RunStore
from redraft.telemetry import LiveExport


@dataclass
class Running:
    """The run's moving parts, started; `stop` ends them."""

    dispatcher: Dispatcher
    fleets: Fleets
    fleet: Lease
    batches: Batches
    ledger: Any | None
    spans: LiveExport | None

    def stop(self) -> None:
        stop_batches(self.batches)
        self.fleets.release(self.fleet)
        stop_ledger(self.ledger)
        if self.spans is not None:
            self.spans.finish()


@dataclass(frozen=True)
class RunHooks:
    """What joins a run to its caller while it runs: what it tells the caller as it goes, the event that stops
    it, and, for a run that is one of a command's many, the fleets that serve it and the share of a CPU its
    actors reserve (`redraft.run`). None of it changes a result or is recorded in the run's manifest: a resume
    may be given other hooks.

        >>> import threading
        >>> from redraft import RunHooks
        >>> hooks = RunHooks(on_result=lambda result: print(result.task_id), stop=threading.Event())
    """

    on_start: Callable[[int, int], None] | None = None
    """Called once the run directory is open: ``(total, already_done)``."""
    on_result: ProgressHook | None = None
    """Called with each task's `redraft.Result` as it lands, in this invocation."""
    on_endpoints: EndpointHook | None = None
    """Called every few seconds with the state of each endpoint's limiter (calls in flight, the adaptive window,
    throttles)."""
    on_estimate: Callable[[Estimate], None] | None = None
    """Told the estimate of the tasks left (`redraft.estimate`) before anything starts."""
    on_live: LiveHook | None = None
    """Told the run as it goes on every turn of the dispatch loop (`redraft.actors.Live`: tasks in flight by
    round, calls and tokens so far, the model hosts' decode rate and share of a core)."""
    stop: threading.Event = field(default_factory=threading.Event)
    """Set it (from a signal handler, another thread) to end the run within a second: `Interrupted`, saying how
    many tasks are done, the tasks in flight cancelled and not recorded."""
    fleets: Fleets | None = None
    """The fleets of the command the run is one of (a tune's evaluations, a comparison's lanes), whose actors
    serve it and outlive it; None: a fleet of its own, stopped as the run ends."""
    cpu_share: float = 1.0
    """The share of a CPU each actor that runs candidates reserves, when other runs share the nodes (a
    comparison's lanes each with a fleet of its own)."""


def start_running(
    run: ResolvedRun, store: RunStore, manifest: dict[str, Any], started: float, hooks: RunHooks
) -> Running:
    """Start ``run``'s parts on the Ray the driver joined, its actors leased from the hooks' fleets (or a fleet of
    its own), each reserving the hooks' CPU share; ``started`` is the run's monotonic start."""
    out = store.root
    batch = batch_name(out)
    run = run.with_setup(payer=store.payer, cpu_share=hooks.cpu_share)
    fleets = hooks.fleets or Fleets(shared=False)
    setup, batches = start_batches(run.setup, batch, store, run.runtime)
    run = run.with_roles(setup).with_settings(run=out.name, batch=batch, call_deadline_s=batches.call_deadline_s)
    ledger = start_ledger(run.strategy, batch, out, store.done, run.settings.share)
    try:
        fleet = fleets.lease(run.cast, run.settings)
    except BaseException:
        stop_batches(batches)
        stop_ledger(ledger)
        raise
    clock = RunClock(started=started, before_s=store.wall_before, budget_s=run.budgets.budget_seconds)
    metrics = RunMetrics(store.root.name)
    dispatcher = _dispatcher(run, fleet, store, clock, metrics, hooks, batches)
    spans = _live_spans(run, manifest, store)
    return Running(dispatcher, fleets, fleet, batches, ledger, spans)


def _live_spans(run: ResolvedRun, manifest: dict[str, Any], store: RunStore) -> LiveExport | None:
    """With ``--otel``, the export that sends each task's spans as the store writes it; else None."""
    if run.runtime.otel is None:
        return None
    specs = run.cast.endpoints  # as resolved: the Python API's objects too
    spans = LiveExport(run.runtime.otel, manifest, specs, run.settings.prices)
    store.listen(spans.task_written)
    return spans


def _dispatcher(
    run: ResolvedRun,
    fleet: Lease,
    store: RunStore,
    clock: RunClock,
    metrics: RunMetrics,
    hooks: RunHooks,
    batches: Batches,
) -> Dispatcher:
    budgets, runtime = run.budgets, run.runtime
    rules = DispatchRules(
        run.scenario,
        max_in_flight=runtime.max_tasks_in_flight or _default_in_flight(run.setup, fleet.nodes, batch=runtime.batch),
        oracle=run.experiment.oracle_feedback,
        task_timeout=budgets.task_timeout,
        task_watchdog=budgets.task_watchdog or (math.inf if runtime.batch else None),
        budget_spent=budgets.spent_by,
        judged=run.setup.judge is not None,
        judge_every_sample=run.experiment.max_rounds == 1,
        prices=run.settings.prices,
        grade_watchdog=batches.grade_watchdog_s,
        stall_window=budgets.stall_window,
    )
    return Dispatcher(
        fleet,
        store,
        rules,
        clock=clock,
        on_result=hooks.on_result,
        breaker=Breaker(run.cast.endpoints),
        metrics=metrics,
        stop=hooks.stop,
        endpoints=EndpointWatch(metrics, hooks.on_endpoints),
        hosts=HostWatch(),
        on_live=recorded(store.root, hooks.on_live),
    )


def _default_in_flight(setup: RoleSetup, nodes: int, *, batch: bool = False) -> int:
    """10 tasks per node with a local model, 64 with remote backends, 4096 with ``--batch`` (a batch answers
    thousands of calls at once; more tasks in flight make fewer, larger batches).

    The node's model host decodes up to 8 sequences at once (`redraft.backends._llama_batch`), and a step of 8
    costs less per token than a step of 4. A task has 1 to 3 calls out, so 10 tasks keep the host's slots full
    where fewer would leave them part empty with nothing waiting. The tokens do not depend on it: a call's text
    depends only on its own prompt and seed, not on what runs beside it."""
    specs = [setup.drafter, setup.critic] + ([setup.verifier] if setup.verifier else [])
    if any(s.spec.startswith("local") for s in specs):
        return 10 * nodes
    return 4096 if batch else 64
