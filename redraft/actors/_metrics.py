"""The run's figures as Ray metrics, so the Ray dashboard and Prometheus show a run as it goes.

Ray exports application metrics from every process through its node's metrics
agent (``ray start --metrics-export-port``; the dashboard's Metrics view reads
the same Prometheus data). Each metric's name gets Ray's ``ray_`` prefix on export;
every series carries the run's id (``run``), so runs sharing a cluster stay apart.

The driver records the task figures and the endpoints' (asking their limiters), and a judge's calls (role ``judge``)
as it writes each judged task; the arbiters record the loop's model calls (a reply replayed to a redone task is not
counted again). Outside Ray nothing is recorded.

See docs/architecture.md, section "The run's Ray metrics".
"""

from __future__ import annotations

import asyncio
from typing import Any

from redraft.backends import EndpointState
from redraft.protocols.messages import Result, Usage

_METRICS: dict[str, Any] = {}


def _metric(kind: str, name: str, description: str, tags: tuple[str, ...]) -> Any:
    """The process's one metric object of that name (Ray refuses a second registration)."""
    if name not in _METRICS:
        from ray.util import metrics

        cls = metrics.Gauge if kind == "gauge" else metrics.Counter
        _METRICS[name] = cls(name, description=description, tag_keys=("run", *tags))
    return _METRICS[name]


def _enabled() -> bool:
    import ray

    return bool(ray.is_initialized())


class RunMetrics:
    """The driver's figures: tasks done, in flight, retried."""

    def __init__(self, run: str = "") -> None:
        self.run = run
        self._on = bool(run) and _enabled()

    def done(self, result: Result) -> None:
        if self._on:
            outcome = "error" if result.stop_reason == "error" else "passed" if result.passed else "failed"
            counter = _metric("counter", "redraft_tasks_done", "Tasks written to the run directory.", ("outcome",))
            counter.inc(1, tags={"run": self.run, "outcome": outcome})

    def in_flight(self, count: int) -> None:
        if self._on:
            _metric("gauge", "redraft_tasks_in_flight", "Tasks out on arbiters and graders.", ()).set(
                count, tags={"run": self.run}
            )

    def endpoint(self, state: EndpointState) -> None:
        if self._on:
            tags = {"run": self.run, "endpoint": state.endpoint}
            figures = {
                "redraft_endpoint_window": ("Calls the endpoint's limiter lets in flight.", state.window),
                "redraft_endpoint_in_flight": ("Calls in flight to the endpoint.", state.in_flight),
                "redraft_endpoint_throttled": ("Attempts the endpoint's server throttled.", state.throttled),
            }
            for name, (description, value) in figures.items():
                if value is not None:
                    _metric("gauge", name, description, ("endpoint",)).set(value, tags=tags)

    def judged(self, model: str, usage: Usage) -> None:
        """A judged task's judge calls (``usage`` priced), in the model-call series under role ``judge``."""
        if self._on:
            for name, tags, amount in model_series("judge", model, usage, self.run):
                _record(name, tags, amount)

    def retried(self, cause: str) -> None:
        if self._on:
            counter = _metric(
                "counter", "redraft_tasks_retried", "Task attempts the machinery's failure ended.", ("cause",)
            )
            counter.inc(1, tags={"run": self.run, "cause": cause})


class ModelMetrics:
    """An arbiter's figures: model calls, cache hits, tokens and USD by role and model.

    Recording a Ray metric costs a tag check and a hand-off to the core worker, and a model call moves
    three to five series: against a fast server that is a share of an arbiter's CPU worth saving. So
    increments add up here, by series, and go to Ray as one record per series: at most `FLUSH_S` after
    the first of them, and whenever a task ends (`flush`), so a finished task's calls are recorded
    before its result leaves the arbiter. Ray exports every few seconds; the second does not show.
    """

    FLUSH_S = 1.0

    def __init__(self, run: str = "") -> None:
        self.run = run
        self._on = bool(run) and _enabled()
        self._pending: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        """Increments not yet recorded, by (metric name, tags)."""
        self._timer: asyncio.TimerHandle | None = None

    def call(self, role: str, model: str, usage: Usage) -> None:
        if not self._on:
            return
        for name, tags, amount in model_series(role, model, usage, self.run):
            self._add(name, tags, amount)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.FLUSH_S, self.flush)

    def _add(self, name: str, tags: tuple[tuple[str, str], ...], amount: float) -> None:
        if amount:
            key = (name, tags)
            self._pending[key] = self._pending.get(key, 0) + amount

    def flush(self) -> None:
        """Record every pending increment."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, {}
        for (name, tags), amount in pending.items():
            _record(name, tags, amount)


Series = tuple[str, tuple[tuple[str, str], ...], float]
"""A model-call counter's name, tags and increment."""


def model_series(role: str, model: str, usage: Usage, run: str) -> list[Series]:
    """What one priced call (or several, summed) adds to each model-call counter."""
    tags = (("run", run), ("role", role), ("model", model))
    return [
        ("redraft_model_calls", tags, usage.calls),
        ("redraft_model_cache_hits", tags, usage.cache_hits),
        ("redraft_model_tokens", (*tags, ("direction", "input")), usage.input_tokens),
        ("redraft_model_tokens", (*tags, ("direction", "output")), usage.output_tokens),
        ("redraft_model_cost_usd", tags, usage.cost_usd),
    ]


def _record(name: str, tags: tuple[tuple[str, str], ...], amount: float) -> None:
    if amount:
        description, keys = _MODEL_SERIES[name]
        _metric("counter", name, description, keys).inc(amount, tags=dict(tags))


_MODEL_SERIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "redraft_model_calls": ("Model calls.", ("role", "model")),
    "redraft_model_cache_hits": ("Calls the response cache answered.", ("role", "model")),
    "redraft_model_tokens": ("Model tokens.", ("role", "model", "direction")),
    "redraft_model_cost_usd": ("Model cost in USD.", ("role", "model")),
}
"""The arbiters' counters: description and tag keys (the run's aside) of each."""
