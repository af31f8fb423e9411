"""A run's provider batches on a cluster (``--batch``): one collector per endpoint, on the driver's node.

The driver starts each endpoint's `redraft.backends._batch.BatchCollector` before any
role, on its own node (where the run directory, and so the batch journal, is), and
asks it to follow the batches an earlier invocation left open. Before that, the driver
recovers the journal (`redraft.backends._batch_journal.recover_journal`: lines that are
not records are set aside, said in one line); a journal that had to be, or that is
missing or empty though the run sent batches before (its manifest says so), is lost,
and the collectors then look for the run's batches in the provider's own list too.
Role actors find a collector by name through `redraft.services`; so does the run's judge (``--judge``), whose
judgments then wait for their batch like the loop's calls (grading is never on the loop's critical path), with
no deadline but ``--batch-wait``. When the run stops, the driver has it cancel what is still open at the provider,
then ends it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
from typing import Any

from redraft.actors._grading import GRADE_WATCHDOG_S
from redraft.actors._ray import RayServices, node_id, on_node
from redraft.backends import (
    JOURNAL,
    MAX_WAITING,
    BackendSpec,
    BatchCollector,
    BatchedSpec,
    BatchRun,
    BatchSettings,
    batchable,
    recover_journal,
)
from redraft.backends.anthropic import AnthropicSpec
from redraft.backends.openai import OpenAISpec
from redraft.config import Runtime
from redraft.engine.pools import ROLE_CALL_DEADLINE_S
from redraft.engine.resolution import RoleSetup
from redraft.rundir import RunStore

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 60.0
"""How long the driver waits for the collectors to cancel the batches still open."""


@dataclasses.dataclass(frozen=True)
class Batches:
    """The run's collectors (one per endpoint with a batch API; none without ``--batch``)."""

    collectors: list[Any]
    judged: bool = False
    """The run's judge sends its calls through a collector."""

    @property
    def call_deadline_s(self) -> float | None:
        """How long a role call may take: no limit when calls wait hours for their batch (``--batch-wait``
        bounds that)."""
        return None if self.collectors else ROLE_CALL_DEADLINE_S

    @property
    def grade_watchdog_s(self) -> float:
        """How long a grader may take on a task: no limit when its judgments wait for their batch."""
        return math.inf if self.judged else GRADE_WATCHDOG_S


def start_batches(setup: RoleSetup, batch: str, store: RunStore, runtime: Runtime) -> tuple[RoleSetup, Batches]:
    """``setup`` with each role whose backend has a batch API sending through its endpoint's collector, each
    collector started on this node (none without ``runtime.batch``)."""
    if not runtime.batch:
        return setup, Batches([])
    import ray

    settings = BatchSettings(wait_s=runtime.batch_wait)
    journal = str(store.root / JOURNAL)
    run = batch_run(store)
    made: dict[str, Any] = {}

    def through_batches(spec: BackendSpec) -> BackendSpec:
        inner = batchable(spec)
        if inner is None:
            return spec
        name = collector_name(batch, inner.spec)
        if name not in made:
            made[name] = start_collector(name, inner, journal, settings, run)
        return BatchedSpec(inner, name, journal, settings, run)

    verifier, judge = setup.verifier, setup.judge
    if judge is not None and (judged_by := through_batches(judge.backend)) is not judge.backend:
        judge = judge.through_batches(judged_by)
    setup = dataclasses.replace(
        setup,
        drafter=through_batches(setup.drafter),
        critic=through_batches(setup.critic),
        verifier=through_batches(verifier) if verifier is not None else None,
        judge=judge,
    )
    resumed = sum(ray.get([c.resume.remote() for c in made.values()]))
    if resumed:
        log.warning("following %d batch(es) sent by an earlier invocation of this run", resumed)
    return setup, Batches(list(made.values()), judged=judge is not None and judge.batched)


def start_collector(
    name: str, inner: OpenAISpec | AnthropicSpec, journal: str, settings: BatchSettings, run: BatchRun
) -> Any:
    """The endpoint's `BatchCollector`, a named actor on this node (the run directory's), restarted if it dies."""
    return (
        RayServices()
        .shared(
            BatchCollector,
            name,
            inner,
            journal,
            settings,
            run,
            per_node=False,
            num_cpus=0,
            scheduling_strategy=on_node(node_id()),
            max_concurrency=MAX_WAITING,
            max_restarts=-1,
            max_task_retries=-1,
        )
        .handle
    )


def batch_run(store: RunStore) -> BatchRun:
    """Whose batches the collectors send and follow; the journal recovered, and whether it was lost."""
    path = store.root / JOURNAL
    recovery = recover_journal(path, store.run_uid)
    if (said := recovery.line()) is not None:
        log.warning("%s", said)
    sent_before = store.sends_batches()
    lost = recovery.count > 0 or (sent_before and (not path.exists() or path.stat().st_size == 0))
    if lost and not recovery.count:
        log.warning("%s is missing or empty though this run sent batches before", JOURNAL)
    if lost:
        log.warning("looking for this run's batches in the provider's list, so that none is paid for twice")
    return BatchRun(uid=store.run_uid, since=store.started - CLOCK_SLACK_S, journal_lost=lost)


CLOCK_SLACK_S = 600.0
"""How much earlier than the run's start a batch may seem made (the provider's clock is not this machine's)."""


def stop_batches(batches: Batches) -> None:
    """Cancel what the run's batches still have open at the provider, and end the collectors."""
    if not batches.collectors:
        return
    import ray

    try:
        cancelled = sum(ray.get([c.cancel_open.remote() for c in batches.collectors], timeout=STOP_TIMEOUT_S))
        if cancelled:
            log.warning("cancelled %d batch(es) still open at the provider", cancelled)
    except Exception as exc:  # the run is over either way: its journal lets a resume follow what is left
        log.warning("could not cancel the open batches: %s", exc)
    for collector in batches.collectors:
        ray.kill(collector)


def collector_name(batch: str, endpoint: str) -> str:
    return f"redraft-batches-{batch}-{hashlib.blake2b(endpoint.encode(), digest_size=6).hexdigest()}"
