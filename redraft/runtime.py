"""Where code runs: inside a Ray worker or in a plain process. The one module that answers it.

redraft's roles are plain classes; the same object is a Ray actor on a cluster
and an in-process object in tests and in `refine`. Three questions come up
wherever they meet, and are answered only here:

- `call`: call a method of a Ray actor handle or of a plain object, alike.
- `in_ray_worker`: is this process a Ray worker (so a per-node service is a named actor)?
- `node_service`: that per-node (or per-cluster) service: a named actor created on first
  use, or an object of this process outside Ray.
- `is_ray_system_error`: did Ray's machinery fail (a process, a node, the object store), as
  opposed to the code that ran? Those failures are retried elsewhere, never a task's result.
- `die_with_raylet`: an actor process that outlives its raylet (a driver-owned local Ray whose
  driver was killed) stops at once instead of running its calls on for seconds.

Ray is imported only when it is needed, so modules that use this one stay
importable (and fast to import) without starting anything.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_IN_PROCESS: dict[str, Any] = {}


async def call(target: Any, method: str, *args: Any) -> Any:
    """``target.method(*args)``, awaited: a Ray actor's remote method, or a plain object's coroutine method."""
    bound = getattr(target, method)
    remote = getattr(bound, "remote", None)
    return await (remote(*args) if remote is not None else bound(*args))


async def answers(target: Any, within_s: float) -> bool:
    """Whether ``target`` answers a ping within ``within_s`` (its event loop runs): always, for a plain object."""
    ready = getattr(target, "__ray_ready__", None)
    if ready is None or not hasattr(ready, "remote"):
        return True
    try:
        await asyncio.wait_for(ready.remote(), within_s)
    except Exception:  # frozen (no answer in time), or dead
        return False
    return True


def is_actor(target: Any) -> bool:
    """Whether ``target`` is a Ray actor handle (its methods have ``.remote``)."""
    import ray

    return isinstance(target, ray.actor.ActorHandle)


def in_ray_worker() -> bool:
    """Whether this process is a Ray worker (an actor or a task), not a driver or a plain process."""
    import ray

    return bool(ray.is_initialized() and ray.get_runtime_context().worker.mode == ray.WORKER_MODE)


def node_id() -> str:
    """The Ray node id of this process, or '' outside Ray."""
    import ray

    if not ray.is_initialized():
        return ""
    return str(ray.get_runtime_context().get_node_id())


def node_service(cls: Callable[..., T], name: str, *args: Any, per_node: bool, **options: Any) -> Any:
    """The one ``cls(*args)`` named ``name``: per node (``per_node``) or per cluster.

    Inside a Ray worker it is a named actor (created on first use by whichever
    process asks first, ``get_if_exists``), pinned to this node when ``per_node``;
    elsewhere it is an object of this process, kept by name. ``options`` are Ray
    actor options. Every caller must pass the same ``args`` for a name.
    """
    if not in_ray_worker():
        if name not in _IN_PROCESS:
            _IN_PROCESS[name] = cls(*args)
        return _IN_PROCESS[name]
    import ray

    full_name = name
    if per_node:
        node = node_id()
        full_name = f"{name}-{node[:12]}"
        options["scheduling_strategy"] = on_node(node)
    return ray.remote(cls).options(name=full_name, get_if_exists=True, **options).remote(*args)


def in_process_services() -> dict[str, Any]:
    """The services of this process (outside Ray), by name: for closing them at exit."""
    return _IN_PROCESS


def on_node(node: str, *, soft: bool = False) -> Any:
    """A scheduling strategy that places an actor on ``node`` (``soft``: elsewhere if that node is gone)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node, soft=soft)


def alive_nodes() -> list[str]:
    """The ids of the cluster's live nodes."""
    import ray

    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    return [n["NodeID"] for n in nodes if n.get("Alive")]


def is_ray_system_error(exc: BaseException) -> bool:
    """Whether ``exc`` is Ray's own failure (an actor, worker or node died, an object was lost, a wait
    timed out, a cancel), not an exception raised by the code that ran."""
    import ray.exceptions as rex

    system = (
        rex.RayActorError,  # ActorDiedError, ActorUnavailableError
        rex.ActorUnschedulableError,
        rex.TaskUnschedulableError,
        rex.WorkerCrashedError,
        rex.NodeDiedError,
        rex.LocalRayletDiedError,
        rex.ObjectLostError,  # OwnerDiedError, ObjectReconstructionFailedError...
        rex.ObjectFetchTimedOutError,
        rex.ObjectStoreFullError,
        rex.OutOfMemoryError,
        rex.GetTimeoutError,
        rex.TaskCancelledError,
        rex.RaySystemError,
    )
    return isinstance(exc, system)


_WATCHING: list[int] = []


def die_with_raylet(poll_s: float = 0.1) -> None:
    """In a Ray worker: exit as soon as this process's parent (its raylet) is gone.

    A driver that starts its own Ray takes the raylet with it when it dies, but the
    workers notice late (seconds, measured), running their calls on: paid model
    requests for a run nobody will write. Polling the parent pid is cheap and exact.
    Once per process; a no-op outside a Ray worker.
    """
    if _WATCHING or not in_ray_worker():
        return
    parent = os.getppid()
    _WATCHING.append(parent)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="redraft-die-with-raylet", daemon=True).start()


def actor_state(handle: Any) -> tuple[str, int]:
    """An actor's state as the cluster's control store knows it (``ALIVE``, ``RESTARTING``,
    ``PENDING_CREATION``, ``DEAD``...) and how often it was restarted.

    It tells a frozen actor (``ALIVE``, not answering) from one still starting on a
    loaded node. A private Ray API (``ray._private.state``): Ray is pinned.
    """
    from ray._private.state import state

    table: dict[str, Any] = state.actor_table(handle._actor_id.hex()) or {}
    return str(table.get("State", "UNKNOWN")), int(table.get("NumRestarts", 0))
