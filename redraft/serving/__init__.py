"""``redraft serve``: refinement behind an OpenAI-compatible endpoint.

```
settings    ServeSettings: the run options every request starts from, the checks and aliases it may name,
            the limits, the keys (as digests)
openai      the OpenAI wire: requests read once, responses, stream chunks, errors in OpenAI's shape
routes      what a request's ``model`` names: a strategy, and the model behind it
chat        a request as a task: its messages as the prompt, under its check's scenario (or none)
refiner     the engine per request: an arbiter per configuration, made once and kept
journal     each replica's run directory per day, which redraft report and redraft trace read
guard       keys, the server's money per period, the figures it reports
requested   what a request may name: models with no endpoint, reached over https, priced under a money budget
log         the server's log file: Ray's messages and the server's warnings, off the terminal
replies     a finished loop as the client reads it, or the error it stands for
app         the ASGI app (FastAPI): the routes, streaming, disconnects, timeouts
thread      the app served from a thread of this process (a notebook, a test)
proxy       what Ray Serve's HTTP proxy answers for a replica lost mid-request (503, Retry-After)
deployment  the app as a Ray Serve deployment: replicas, autoscaling, Ray metrics (the one module with Ray)
```
"""

import os
import threading
from pathlib import Path
from typing import Any

from redraft.serving._app import make_app
from redraft.serving._guard import CountedMetrics, Metrics, PeriodSpending, Spending
from redraft.serving._journal import served_since
from redraft.serving._log import log_path
from redraft.serving._openai import APIError
from redraft.serving._proxy import PROXY_CALLBACK, PROXY_CALLBACK_VARIABLE, proxy_middlewares
from redraft.serving._settings import LOOPBACK, ServeSettings, digest, key_digests, named_pairs
from redraft.serving._thread import Serving, serve_until, serving

__all__ = [
    "LOOPBACK",
    "PROXY_CALLBACK",
    "PROXY_CALLBACK_VARIABLE",
    "APIError",
    "CountedMetrics",
    "Metrics",
    "PeriodSpending",
    "ServeSettings",
    "Serving",
    "Spending",
    "build",
    "digest",
    "key_digests",
    "make_app",
    "named_pairs",
    "proxy_middlewares",
    "serve_here",
    "serve_on_ray",
    "served_summary",
    "serving",
]


def serve_here(settings: ServeSettings, stop: threading.Event) -> None:
    """Serve ``settings`` in this process under uvicorn, with no Ray (one replica), until ``stop`` is set; the
    requests in flight then have ``settings.drain_s`` seconds to finish."""
    serve_until(settings, stop)


def serve_on_ray(
    settings: ServeSettings, *, address: str | None, max_replicas: int, stop: threading.Event, verbose: bool = False
) -> None:
    """Serve ``settings`` on Ray Serve (the cluster at ``address``, or a local Ray) until ``stop`` is set, then
    shut the application down, its replicas given ``settings.drain_s`` seconds to finish their requests (on a
    cluster joined, until they finish: `redraft.serving._deployment.stop_serving`).

    Ray's and Ray Serve's messages go to the server's log (`log_path`), and to the terminal too only when
    ``verbose``. A local Ray started here gives its proxy `PROXY_CALLBACK` (a replica lost mid-request answered
    503 with ``Retry-After``); a cluster's nodes need it in their environment (`PROXY_CALLBACK_VARIABLE`)."""
    from redraft.actors import ensure_ray
    from redraft.serving._deployment import quiet_serve_logger, run_on_serve, stop_serving

    log = log_path(settings.out)
    quiet_serve_logger(log, verbose=verbose)
    os.environ.setdefault(PROXY_CALLBACK_VARIABLE, PROXY_CALLBACK)  # a local Ray started here passes it on
    ensure_ray(address, log=log, verbose=verbose)
    run_on_serve(settings, max_replicas=max_replicas, proxy_location="EveryNode" if address else "HeadOnly")
    print(f"redraft serve: listening on http://{settings.host}:{settings.port}/v1", flush=True)
    stop_serving(stop, settings.drain_s, own_ray=address is None)


def served_summary(settings: ServeSettings, since: float) -> str:
    """The line ``redraft serve`` ends with: what it served since ``since`` and where the traces and its log are."""
    root = Path(settings.out) if settings.out else None
    return f"redraft serve: stopped; {served_since(root, since)}; log in {log_path(settings.out)}"


def build(args: dict[str, Any]) -> Any:
    """A Serve config's application (``import_path: redraft.serving:build``, ``args``: the `ServeSettings`
    fields and ``max_replicas``); Ray Serve is imported only here."""
    from redraft.serving._deployment import build as built

    return built(args)
