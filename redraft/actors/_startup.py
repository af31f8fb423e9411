"""Ray for a run, once per process: the cluster ``--address`` names, or a local Ray started here (`ensure_ray`).

Every command that runs tasks starts Ray here and nowhere else: ``run`` and its
resume, ``compare``, ``tune``.

A local Ray started here is watched (`redraft.actors._reaper`): when this process
ends, however it ends, what is left of that Ray is killed at once.

A local Ray started here runs its workers at this process's priority (`worker_niceness`): Ray's own default
starts every worker 15 steps nicer than its raylet (``RAY_worker_niceness``, applied by each worker as it
starts), which left the embedded model's host, itself a worker, with 4 to 6 % of a core beside three
ordinary busy processes, and a run that finished nothing in 15 minutes (measured). ``REDRAFT_WORKER_NICENESS``
sets another (a batch job that should yield to a desk's work: 10, say). A cluster joined with ``--address``
is left as its operator started it: its workers' niceness is its raylets' setting, not a driver's.

See docs/architecture.md, section "Starting a local Ray on a loaded machine".
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from redraft.actors import _reaper
from redraft.actors._ray import RAY_OUTPUT
from redraft.errors import ClusterError, UserError, describe

RETRY_WAIT_S = 120.0
"""How long the second start of a local Ray waits for each of its steps."""
NICENESS_ENV = "REDRAFT_WORKER_NICENESS"
"""The niceness a local Ray's workers run at, when set; else this process's own (`worker_niceness`)."""
_RAY_NICENESS = "RAY_worker_niceness"

log = logging.getLogger(__name__)


def ensure_ray(address: str | None, *, probe_s: float = 5.0, log: Path | None = None, verbose: bool = False) -> None:
    """Join ``address``, or start a fresh local Ray when it is None (see the module docstring).

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
    if log is not None:
        RAY_OUTPUT.route(log, verbose=verbose)
    if address:
        try:
            _init(address=address, **kwargs)
        except ConnectionError as exc:
            raise UserError(f"cannot join the Ray cluster at {address}: {exc}") from None
        return
    _start_local(kwargs)


def _init(**kwargs: Any) -> None:
    """``ray.init``, this process's SIGINT and SIGTERM handlers kept."""
    import ray

    kept = _signal_handlers()
    try:
        ray.init(**kwargs)
    finally:
        for signum, handler in kept.items():
            signal.signal(signum, handler)


def _start_local(kwargs: dict[str, Any]) -> None:
    """Start a local Ray; once more with longer waits if it failed to start; `ClusterError` if it failed twice."""
    niceness = worker_niceness()
    failure = _started(kwargs, niceness)
    if failure is None:
        return
    said = describe(failure)
    log.warning("redraft: Ray did not start (%s); starting it once more, waiting up to %g s", said, RETRY_WAIT_S)
    failure = _started(kwargs, niceness, wait_s=RETRY_WAIT_S)
    if failure is not None:
        raise ClusterError(
            f"Ray did not start within {RETRY_WAIT_S:g} s, on the second try ({describe(failure)}); the machine may "
            "be busy: retry, or start one with `ray start --head` and pass its address with --address"
        )


def _started(kwargs: dict[str, Any], niceness: int, *, wait_s: float | None = None) -> BaseException | None:
    """One start of a local Ray, its workers at ``niceness`` (each of its waits ``wait_s`` when given): None once it
    runs, watched; else why it did not, with what it left killed. A wrong call raises."""
    import ray

    before = set(_reaper.children(os.getpid()))
    try:
        with _niceness(niceness), _waiting(wait_s) if wait_s else contextlib.nullcontext():
            _init(address="local", **kwargs)
    except Exception as exc:
        if not _failed_to_start(exc):
            raise
        ray.shutdown()
        _reaper.kill(_reaper.descendants(set(_reaper.children(os.getpid())) - before))
        return exc
    _reaper.watch(sorted(set(_reaper.children(os.getpid())) - before))
    return None


def _failed_to_start(exc: BaseException) -> bool:
    """Whether ``ray.init`` raised because a local Ray did not come up, not for a wrong argument.

    Ray 2.60 says so with a plain `Exception` (the node's start-up timeout), a `RuntimeError` (a port file never
    written, a node lookup that failed), or a timeout or a refused connection to what it started; a `TypeError`
    or `ValueError` is a wrong call, and goes on as it is.
    """
    return type(exc) is Exception or isinstance(exc, (RuntimeError, TimeoutError, ConnectionError))


def worker_niceness() -> int:
    """The niceness a local Ray started here runs its workers at: ``REDRAFT_WORKER_NICENESS``, else this
    process's own. `UserError` for a value that is not a niceness, or one below this process's (a raised
    priority only root may give)."""
    own = os.nice(0)
    text = os.environ.get(NICENESS_ENV, "").strip()
    if not text:
        return own
    try:
        value = int(text)
    except ValueError:
        raise UserError(f"{NICENESS_ENV}={text!r} is not a niceness (a whole number, {own} to 19)") from None
    if not own <= value <= 19:
        raise UserError(
            f"{NICENESS_ENV}={value} is outside {own} to 19: a worker may run at this process's priority "
            "(its niceness) or below it, not above (start redraft itself under `nice` to run everything lower)"
        )
    return value


@contextlib.contextmanager
def _niceness(niceness: int) -> Iterator[None]:
    """Ray started in the block runs its workers at ``niceness``: each worker makes itself ``RAY_worker_niceness``
    nicer than the raylet it is started by, which inherits this process's niceness."""
    saved = os.environ.get(_RAY_NICENESS)
    os.environ[_RAY_NICENESS] = str(niceness - os.nice(0))
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(_RAY_NICENESS, None)
        else:
            os.environ[_RAY_NICENESS] = saved


@contextlib.contextmanager
def _waiting(wait_s: float) -> Iterator[None]:
    """Ray's start-up waits lengthened to ``wait_s`` while the block runs (docs/architecture.md, section "Starting a
    local Ray on a loaded machine")."""
    import ray._private.services as services

    names = ("RAY_gcs_server_port_wait_time_s", "RAY_raylet_start_wait_time_s")
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(dict.fromkeys(names, str(int(wait_s))))
    get_node = services.get_node
    services.get_node = _asking_until(get_node, wait_s)
    try:
        yield
    finally:
        services.get_node = get_node
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _asking_until(lookup: Callable[..., Any], wait_s: float, pause_s: float = 0.5) -> Callable[..., Any]:
    """``lookup``, asked again while it raises `RuntimeError` (not found yet), for up to ``wait_s`` seconds."""

    def asking(*args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return lookup(*args, **kwargs)
            except RuntimeError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(pause_s)

    return asking


def _signal_handlers() -> dict[int, Any]:
    """SIGINT's and SIGTERM's Python handlers, when this is the main thread (only it may set them)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: h for s in (signal.SIGINT, signal.SIGTERM) if (h := signal.getsignal(s)) is not None}


def check_address(address: str | None, within_s: float = 5.0) -> None:
    """`UserError` naming ``address`` unless it is none, ``auto``, a URL, or a ``HOST:PORT`` that answers within
    ``within_s`` seconds: asked before a run makes its directory, so an address where nothing listens leaves
    nothing behind."""
    if address and ":" in address and "://" not in address:
        _probe(address, within_s)


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
