"""Ray, asked in one place: is this a handle, is this a Ray worker, which node, which nodes are alive.

Also the actor system's `redraft.services.Services`: in a process the actor system
set up, a backend's shared objects (the model host per node, the rate limiter per
endpoint) are named actors, created on first use by whichever process asks first.
And `die_with_raylet`: an actor process that outlives its raylet (a driver-owned
local Ray whose driver was killed) stops at once instead of running its calls on.

And `ensure_ray`: a run joins the cluster it is given, or starts a fresh local Ray of its own.

Ray is imported inside the functions, so importing this module starts nothing.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from redraft.errors import UserError
from redraft.services import install

T = TypeVar("T")


async def answers(handle: Any, within_s: float) -> bool:
    """Whether the actor ``handle`` answers a ping within ``within_s`` (its event loop runs)."""
    try:
        await asyncio.wait_for(handle.__ray_ready__.remote(), within_s)
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


def on_node(node: str, *, soft: bool = False) -> Any:
    """A scheduling strategy that places an actor on ``node`` (``soft``: elsewhere if that node is gone)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node, soft=soft)


def alive_nodes() -> list[str]:
    """The ids of the cluster's live nodes."""
    import ray

    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    return [n["NodeID"] for n in nodes if n.get("Alive")]


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


@dataclass
class SharedActor:
    """A named actor `RayServices.shared` made or found, and how to make or find it again.

    A Ray actor dies with the process that made it, whatever its restarts: a model host made by a drafter
    goes when the fleet replaces that drafter, or when one lane of a comparison ends and its actors with it.
    Every other caller then holds a dead handle. `RayServices.call` makes the actor again (or finds the one
    another caller made first) and sends the call once more, so one actor's end is not every task's failure.
    """

    make: Callable[[], Any]
    handle: Any


class RayServices:
    """A backend's shared objects as named actors (`redraft.services.Services`), installed in every process the
    actor system sets up."""

    def shared(self, cls: Callable[..., T], name: str, *args: Any, per_node: bool, **options: Any) -> SharedActor:
        import ray

        full_name = name
        if per_node:
            node = node_id()
            full_name = f"{name}-{node[:12]}"
            options["scheduling_strategy"] = on_node(node)

        def make() -> Any:
            return ray.remote(cls).options(name=full_name, get_if_exists=True, **options).remote(*args)

        return SharedActor(make, make())

    async def call(self, target: Any, method: str, *args: Any) -> Any:
        from ray.exceptions import ActorDiedError

        if not isinstance(target, SharedActor):
            return await getattr(target, method).remote(*args)
        try:
            return await getattr(target.handle, method).remote(*args)
        except ActorDiedError:
            target.handle = target.make()  # it went with the process that made it: made again, or found
            return await getattr(target.handle, method).remote(*args)

    def node(self) -> str:
        return node_id()


_SET_UP: list[bool] = []


def set_up_actor_process() -> None:
    """Once per actor process: its backends' shared objects are actors, it dies with its raylet, Ray's
    serialization is ready before its first call, and what start-up made is out of the collector's way. A no-op
    outside a Ray worker (an actor's class made into a plain object, in tests)."""
    if _SET_UP or not in_ray_worker():
        return
    _SET_UP.append(True)
    install(RayServices())
    die_with_raylet()
    ready_serialization()
    freeze_start_up()


def freeze_start_up() -> None:
    """Collect once, then leave every object alive now (the modules, Ray's and redraft's, about 100,000 of them
    in a role actor) out of later collections, as Ray Serve does in its replicas: a full collection walks every
    tracked object, and took 60 to 70 ms of an actor's event loop each time, 9 to 13 % of its CPU in all
    (measured: 3 to 5 % once frozen). What is frozen stays for the process's life, as the modules would."""
    gc.collect()
    gc.freeze()


def ready_serialization() -> None:
    """Build this worker's Ray serialization context now, as its actor starts. Ray builds it on the worker's
    first call that pickles (an actor started with no arguments, as a fleet's are, has made none), importing
    pyarrow, numpy and pydantic for their serializers on the way: 0.3 to 1 s of CPU, measured, which a run's
    first tasks otherwise wait through on every actor of the fleet at once."""
    import ray._private.worker as ray_worker

    ray_worker.global_worker.get_serialization_context()  # type: ignore[no-untyped-call]


class RayOutput:
    """Where Ray's own messages go: its start-up and worker warnings, and the messages it relays from the
    cluster (a worker that failed, a pool that grew, its log deduplication notes). They go to a log file
    (the run directory's ``ray.log``) and reach the terminal only when ``verbose``: a run prints redraft's
    own lines. What redraft learns from Ray that matters (an actor that cannot start, a dead node) reaches
    the user as redraft's own one-line errors.
    """

    def __init__(self) -> None:
        self.path: Path | None = None
        self.verbose = False
        self._file: logging.Handler | None = None

    def route(self, path: Path, *, verbose: bool) -> None:
        """Send Ray's messages from now on to ``path`` (and to the terminal too when ``verbose``)."""
        import ray._private.worker as ray_worker

        self.path, self.verbose = path, verbose
        path.parent.mkdir(parents=True, exist_ok=True)
        logger = logging.getLogger("ray")
        if self._file is not None:
            logger.removeHandler(self._file)
        self._file = logging.FileHandler(path, encoding="utf-8", delay=True)
        self._file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(self._file)
        shared = logging.getLogger().handlers  # a host's own (a test runner's capture) serve every logger: not ours
        for handler in logger.handlers:
            if handler is not self._file and handler not in shared and isinstance(handler, logging.StreamHandler):
                handler.setLevel(logging.NOTSET if verbose else logging.CRITICAL + 1)
        if not hasattr(ray_worker, "_redraft_print_to_stdstream"):
            ray_worker._redraft_print_to_stdstream = ray_worker.print_to_stdstream  # type: ignore[attr-defined]
            ray_worker.print_to_stdstream = self._relayed

    def _relayed(self, data: dict[str, Any], ignore_prefix: bool) -> None:
        """Ray's relayed lines (the driver's error listener calls this by its module's name)."""
        import ray._private.worker as ray_worker

        if self.path is not None:
            with open(self.path, "a", encoding="utf-8") as log:
                who = data.get("actor_name") or data.get("task_name") or data.get("pid", "")
                log.writelines(f"({who}) {line}\n" for line in data.get("lines", []))
        if self.verbose or self.path is None:
            ray_worker._redraft_print_to_stdstream(data, ignore_prefix)  # type: ignore[attr-defined]


RAY_OUTPUT = RayOutput()
"""This process's routing of Ray's messages."""


def ensure_ray(address: str | None, *, probe_s: float = 5.0, log: Path | None = None, verbose: bool = False) -> None:
    """Join ``address``, or start a fresh local Ray when it is None.

    Ray's own messages go to ``log`` from then on (`redraft.actors._ray.RayOutput`), and to the terminal too
    only when ``verbose``.

    ``ray.init()`` with no address would join whatever Ray it finds on the
    machine (``RAY_ADDRESS``, or a cluster recorded under /tmp/ray, even a dead
    one): a run without ``--address`` must not depend on such leftovers. A
    ``HOST:PORT`` where nothing listens is a usage error within ``probe_s``
    seconds (``ray.init`` itself would retry for minutes, silently).

    The process's own SIGINT and SIGTERM handlers are kept: Ray installs its own as it starts (one that dumps
    a C-level report on SIGTERM), and a caller that stops cleanly on a signal must still get it.
    """
    import ray

    if ray.is_initialized():
        return
    if address and ":" in address and "://" not in address:
        _probe(address, probe_s)
    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING, "log_to_driver": False}
    kept = _signal_handlers()
    if log is not None:
        RAY_OUTPUT.route(log, verbose=verbose)
    try:
        ray.init(address=address or "local", **kwargs)
    except ConnectionError as exc:
        raise UserError(f"cannot join the Ray cluster at {address}: {exc}") from None
    finally:
        for signum, handler in kept.items():
            signal.signal(signum, handler)


def _signal_handlers() -> dict[int, Any]:
    """SIGINT's and SIGTERM's Python handlers, when this is the main thread (only it may set them)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: h for s in (signal.SIGINT, signal.SIGTERM) if (h := signal.getsignal(s)) is not None}


def _probe(address: str, within_s: float) -> None:
    """`UserError` naming ``address`` unless a TCP connection to it opens within ``within_s`` seconds."""
    host, _, port_text = address.rpartition(":")
    try:
        port = int(port_text)
    except ValueError:
        raise UserError(f"--address {address!r} is not HOST:PORT (or auto)") from None
    deadline = time.monotonic() + within_s
    while True:
        try:
            with socket.create_connection((host.strip("[]"), port), timeout=max(0.1, deadline - time.monotonic())):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise UserError(
                    f"cannot join the Ray cluster at {address}: nothing answers there ({exc.strerror or exc}); "
                    "start it with `ray start --head`, or leave out --address to run on a local Ray"
                ) from None
            time.sleep(0.25)
