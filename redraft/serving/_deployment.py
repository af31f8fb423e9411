"""The app as a Ray Serve deployment: replicas that autoscale on their queue, Ray metrics, and the server's money
shared by every replica. The one module of `redraft.serving` that imports Ray.

Each replica builds the app in its own process, after its constructor (`serve.ingress()` with no app, and
``__serve_build_asgi_app__``): its run directory is its own, and its requests run as tasks on a fleet of the
cluster's role actors that it leases per run configuration (`redraft.actors.FleetArbiters`), stopped with it.
The replicas share the money spent in the period, kept by one named actor (`SpendingActor`), which each
replica reads without waiting (at most one request late, so the budget may be passed by the requests already
in flight when it is reached, never by more). Replicas reserve no CPU: a request waits on model servers.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import ray
from ray import serve
from ray.serve import Application
from ray.util import metrics

from redraft.actors import FleetArbiters
from redraft.errors import UserError
from redraft.serving._app import OUTER_GRACE_S, make_app
from redraft.serving._guard import PeriodSpending
from redraft.serving._settings import ServeSettings, key_digests

APP_NAME = "redraft"
SPENDING_ACTOR = "redraft-serve-spending"
TARGET_ONGOING_REQUESTS = 16
"""Requests in flight per replica that autoscaling aims at: a request mostly waits on its model calls."""
MAX_ONGOING_REQUESTS = 64
"""Requests a replica takes at once; past them the proxy queues, and the queue is what scales replicas up."""
DRAIN_S = 30.0
"""Past the request timeout, how long a replica being stopped (downscaled, replaced) waits for its requests."""
DRAIN_POLL_S = 0.2
"""How often a replica being stopped looks whether its requests in flight are done (Ray Serve's default, 2 s,
held every stop that long)."""
PROXY_GRACE_S = 10.0
"""Past the app's own cut of a loop, how long the proxy still waits for a replica's answer before it gives up."""


def autoscaling(max_replicas: int, min_replicas: int = 1) -> dict[str, Any]:
    """Ray Serve's ``autoscaling_config``: ``min_replicas`` at rest, more as requests queue."""
    return {
        "min_replicas": min_replicas,
        "max_replicas": max_replicas,
        "target_ongoing_requests": TARGET_ONGOING_REQUESTS,
        "upscale_delay_s": 5.0,
        "downscale_delay_s": 120.0,
    }


class RayMetrics:
    """`redraft.serving.Metrics` as Ray metrics (the dashboard's, and Prometheus through Ray's metrics agent)."""

    def __init__(self) -> None:
        self._requests = metrics.Counter(
            "redraft_serve_requests", description="Chat requests answered, by status.", tag_keys=("route", "status")
        )
        self._latency = metrics.Histogram(
            "redraft_serve_latency_s",
            description="Seconds from a request's arrival to its answer.",
            boundaries=[0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
            tag_keys=("route",),
        )
        self._calls = metrics.Histogram(
            "redraft_serve_calls_per_request",
            description="Model calls behind one answer.",
            boundaries=[1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64],
            tag_keys=("route",),
        )
        self._cost = metrics.Counter("redraft_serve_cost_usd", description="USD the requests' calls cost.")

    def request(self, route: str, status: int, seconds: float, calls: int, usd: float) -> None:
        self._requests.inc(1, tags={"route": route, "status": str(status)})
        self._latency.observe(seconds, tags={"route": route})
        if calls:
            self._calls.observe(calls, tags={"route": route})
        if usd:
            self._cost.inc(usd)


@ray.remote(num_cpus=0)
class SpendingActor:
    """The server's money for the period, for every replica."""

    def __init__(self, period_s: float) -> None:
        self._spending = PeriodSpending(period_s)

    def add(self, usd: float) -> float:
        self._spending.add(usd)
        return self._spending.spent()

    def spent(self) -> float:
        return self._spending.spent()


class SharedSpending:
    """`redraft.serving.Spending` kept by the `SpendingActor`, read without blocking the replica's event loop."""

    def __init__(self, period_s: float) -> None:
        self._actor = SpendingActor.options(  # type: ignore[attr-defined]
            name=SPENDING_ACTOR, get_if_exists=True, lifetime="detached", namespace="redraft-serve"
        ).remote(period_s)
        self._known = 0.0
        self._asked: Any = None
        self._lock = threading.Lock()

    def spent(self) -> float:
        with self._lock:
            if self._asked is not None:
                ready, _ = ray.wait([self._asked], timeout=0)
                if ready:
                    self._known, self._asked = ray.get(ready[0]), None
            if self._asked is None:
                self._asked = self._actor.spent.remote()
            return self._known

    def add(self, usd: float) -> None:
        if usd:
            with self._lock:
                self._asked = self._actor.add.remote(usd)


@serve.ingress()
class RedraftServer:
    """One replica: the app built in its process from the server's settings."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._settings = msgspec.convert(settings, ServeSettings)

    def __serve_build_asgi_app__(self) -> Any:
        spending = SharedSpending(self._settings.period_s) if self._settings.usd_per_period is not None else None
        return make_app(
            self._settings,
            metrics=RayMetrics(),
            spending=spending,
            engines=FleetArbiters(idle_s=self._settings.fleet_idle_s),
        )


def application(settings: ServeSettings, max_replicas: int = 4, min_replicas: int = 1) -> Application:
    """The Serve application of ``settings``, for `serve.run` (``redraft serve``) or a Serve config (`build`)."""
    settings.validate()
    if not 0 <= min_replicas <= max_replicas or max_replicas < 1:
        raise UserError(f"replicas: need 0 <= min_replicas <= max_replicas and max_replicas >= 1, got "
                        f"{min_replicas} and {max_replicas}")  # fmt: skip
    deployment = serve.deployment(
        name="RedraftServer",
        autoscaling_config=autoscaling(max_replicas, min_replicas),
        max_ongoing_requests=MAX_ONGOING_REQUESTS,
        graceful_shutdown_timeout_s=settings.request_timeout_s + DRAIN_S,
        graceful_shutdown_wait_loop_s=DRAIN_POLL_S,
        ray_actor_options={"num_cpus": 0},
    )(RedraftServer)
    return deployment.bind(msgspec.to_builtins(settings))


def build(args: dict[str, Any]) -> Application:
    """A Serve config's application builder (``import_path: redraft.serving:build``): ``args`` are the
    `ServeSettings` fields, ``max_replicas``, and ``api_keys_file`` (a file of keys, one a line, on the nodes:
    a mounted Secret), whose keys' digests join ``key_digests``."""
    given = dict(args)
    max_replicas = int(given.pop("max_replicas", 4))
    min_replicas = int(given.pop("min_replicas", 1))
    keys_file = given.pop("api_keys_file", None)
    if keys_file is not None:
        given["key_digests"] = [*given.get("key_digests", []), *key_digests(None, Path(keys_file))]
    return application(msgspec.convert(given, ServeSettings), max_replicas, min_replicas)


def proxy_timeout_s(settings: ServeSettings) -> float:
    """How long the proxy waits for a replica's answer: past the request timeout and the app's own grace, so a
    replica that hangs (alive, answering nothing) is cut by the proxy too, and a client never waits for ever."""
    return settings.request_timeout_s + OUTER_GRACE_S + PROXY_GRACE_S


def run_on_serve(
    settings: ServeSettings, *, max_replicas: int = 4, min_replicas: int = 1, proxy_location: str = "HeadOnly"
) -> None:
    """Start Serve's HTTP proxy on ``settings``' host and port and the application on it (Ray already up)."""
    http = {"host": settings.host, "port": settings.port, "request_timeout_s": proxy_timeout_s(settings)}
    serve.start(proxy_location=proxy_location, http_options=http)
    serve.run(application(settings, max_replicas, min_replicas), name=APP_NAME, route_prefix="/", blocking=False)


def quiet_serve_logger(path: Path, *, verbose: bool) -> None:
    """Ray Serve's messages in this process (its ``ray.serve`` logger, which prints to the terminal as Ray Serve
    is imported) go to the file ``path``, and to the terminal too only when ``verbose``."""
    logger = logging.getLogger("ray.serve")
    path.parent.mkdir(parents=True, exist_ok=True)
    if not any(isinstance(h, logging.FileHandler) and h.baseFilename == str(path.absolute()) for h in logger.handlers):
        to_file = logging.FileHandler(path, encoding="utf-8", delay=True)
        to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(to_file)
    shared = logging.getLogger().handlers  # a host's own (a test runner's capture) serve every logger: not ours
    for handler in logger.handlers:
        if type(handler) is logging.StreamHandler and handler not in shared:
            handler.setLevel(logging.NOTSET if verbose else logging.CRITICAL + 1)


def stop_serving(stop: threading.Event, drain_s: float, *, own_ray: bool, poll_s: float = 0.5) -> None:
    """Wait for ``stop``, then delete the application, its replicas draining their requests in flight, for at
    most ``drain_s`` seconds: past them, a Ray started here (``own_ray``) is shut down with the loops still
    running; on a cluster joined, Serve's own shutdown lets the replicas finish (up to their graceful timeout,
    which autoscaling's downscaling needs long)."""
    while not stop.wait(poll_s):
        time.sleep(0)
    serve.delete(APP_NAME, _blocking=False)
    deadline, waited = time.monotonic() + drain_s, threading.Event()
    while APP_NAME in serve.status().applications and time.monotonic() < deadline:
        waited.wait(DRAIN_POLL_S)
    if own_ray and APP_NAME in serve.status().applications:
        ray.shutdown()
        return
    serve.shutdown()  # type: ignore[no-untyped-call]
