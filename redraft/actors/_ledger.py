"""The batch's ledger on a cluster: started by the driver before any task, rebuilt from the run directory on resume.

A strategy that learns across the batch (`redraft.strategies.Strategy.shares_batch`)
reaches its `redraft.strategies.Ledger` by name through `redraft.services`. The
driver makes it first, on its own node (where the run directory is), and hands it
what the finished tasks of earlier invocations taught and left in the bank, read
from their frames (`redraft.rundir.spending`). So a resumed run goes on from what
it had learned, and a task redone counts once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from redraft.actors._ray import RayServices, node_id, on_node
from redraft.rundir import Frame, RunReader, TaskEntry
from redraft.rundir.spending import spending
from redraft.strategies import CallOutcome, Ledger, Share, Strategy, ledger_name


def batch_name(out: Path) -> str:
    """The run's batch name: its directory's name and a hash of where it is (two runs of the same name on one
    cluster are two batches)."""
    where = hashlib.blake2b(str(out.resolve()).encode(), digest_size=4).hexdigest()
    return f"{out.name}-{where}"


def start_ledger(strategy: Strategy, batch: str, out: Path, done: set[str], share: Share | None) -> Any | None:
    """The batch's ledger as an actor on this node, primed from the finished tasks in ``out`` (None: the
    strategy learns nothing across the batch)."""
    if not strategy.shares_batch:
        return None
    import ray

    observations, settled = primer(RunReader(out).tasks(), done, share) if done else ([], {})
    # Restarted if its process dies, from the same primer; a call it had not answered is sent again (every
    # entry is keyed, so none counts twice). What this invocation taught it before then is lost: later
    # tasks learn it again, and calls that finished tasks left in the bank go unspent, never spent twice.
    ledger = RayServices().shared(
        Ledger,
        ledger_name(batch),
        observations,
        settled,
        per_node=False,
        num_cpus=0,
        scheduling_strategy=on_node(node_id()),
        max_restarts=-1,
        max_task_retries=-1,
    )
    ray.get(ledger.handle.balance.remote())  # started, before any task asks for it
    return ledger.handle


def stop_ledger(ledger: Any | None) -> None:
    """The run is over: its ledger goes (what it learned is in the run directory's frames)."""
    if ledger is not None:
        import ray

        ray.kill(ledger)


def primer(
    tasks: Iterable[tuple[TaskEntry, list[Frame]]], done: set[str], share: Share | None
) -> tuple[list[CallOutcome], dict[str, float]]:
    """What the finished tasks taught (their calls' outcomes) and left in the bank (their share less what
    they spent), for `Ledger.prime`."""
    observations: list[CallOutcome] = []
    settled: dict[str, float] = {}
    for entry, frames in tasks:
        if entry.task_id not in done:
            continue
        observations += [
            CallOutcome(f"{s.task_id}/{s.round}/{s.sample}", s.state, s.action, s.improved)
            for s in spending(entry.task_id, frames)
            if s.call == "draft" and s.improved is not None
        ]
        if share is not None:
            settled[entry.task_id] = share.amount - share.spent(entry.result.usage)
    return observations, settled
