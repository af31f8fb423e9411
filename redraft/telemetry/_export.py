"""A run's spans sent to an OTLP/HTTP endpoint: read back from its directory (`export_run`), or each task's as
the driver writes it (`LiveExport`).

Either way the tree is the same: one ``redraft.run`` span, the root, whose children are the run's tasks
(`redraft.telemetry._spans.task_span`), sent a task at a time, so memory holds one task's spans, never the
run's. The run span ends last, with the totals of the tasks sent under it.

Times (frames carry no clock): live, a task ends when the driver writes it, and the run span lasts from the
first dispatch to the end of the invocation (a resumed run's invocations are traces of their own). Read back,
the directory holds when the run started (``started_at`` in the manifest) and how long each task ran, not
when each began: every task starts at the run's start, and the run span lasts the run's wall time.

Backend specs: live, each role's spec as the run resolved it; read back, as the manifest's config names them
(a backend object given to the Python API in place of a spec is not in the manifest).
"""

from __future__ import annotations

import calendar
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redraft.backends.pricing import PriceTable, load_prices
from redraft.errors import UserError
from redraft.protocols.messages import Result, Usage
from redraft.rundir import RunReader, decode_frame
from redraft.telemetry._otlp import Sender, Streamer
from redraft.telemetry._spans import Attributes, RunFacts, task_span

log = logging.getLogger(__name__)

RUN = "redraft.run"


def specs_by_role(config: dict[str, Any]) -> dict[str, str]:
    """Each role's spec as a run's config names them: the self-critic is the drafter's model, and so is the
    verifier's unless ``--verifier`` names one (`redraft.engine.resolution.Cast.endpoints`'s rule)."""
    drafter = str(config.get("drafter") or "")
    return {
        "drafter": drafter,
        "critic": str(config.get("critic") or ""),
        "self_critic": drafter,
        "verifier": str(config.get("verifier") or drafter),
        "judge": str(config.get("judge") or ""),
    }


def run_attributes(manifest: dict[str, Any]) -> Attributes:
    config = manifest.get("config") or {}
    named = {
        "redraft.run.id": manifest.get("run_id"),
        "redraft.fingerprint": manifest.get("fingerprint"),
        "redraft.scenario": config.get("scenario"),
        "redraft.strategy": config.get("strategy"),
    }
    return {key: str(value) for key, value in named.items() if value is not None}


@dataclass
class _Totals:
    tasks: int = 0
    usage: Usage = field(default_factory=Usage)

    def add(self, result: Result) -> None:
        self.tasks += 1
        self.usage = self.usage + result.usage

    def attributes(self) -> Attributes:
        return {
            "redraft.tasks": self.tasks,
            "redraft.usage.input_tokens": self.usage.input_tokens,
            "redraft.usage.output_tokens": self.usage.output_tokens,
            "redraft.usage.calls": self.usage.calls,
            "redraft.cost_usd": self.usage.cost_usd,
        }


def started_at(manifest: dict[str, Any]) -> float:
    """The run's start (the manifest's ``started_at``, UTC), in seconds since the epoch; now if it has none."""
    try:
        return float(calendar.timegm(time.strptime(str(manifest["started_at"]), "%Y-%m-%dT%H:%M:%SZ")))
    except (KeyError, ValueError):
        return time.time()


def export_run(root: Path, endpoint: str) -> tuple[str, int]:
    """Send the spans of the run at ``root`` to ``endpoint``; the URL they went to and how many spans.

    `UserError` for a directory that is not a run, a price file the run named that is gone, or an endpoint
    that does not take the spans."""
    reader = RunReader(root)
    manifest = reader.manifest()
    config = manifest.get("config") or {}
    try:
        prices = load_prices(config.get("prices"))
    except UserError as exc:
        raise UserError(f"{exc} (the run's --prices: export where the run ran, to price its calls)") from None
    facts, start = RunFacts(specs_by_role(config), prices), started_at(manifest)
    sender = Sender(endpoint, str(manifest.get("run_id") or root.name))
    try:
        run = sender.start(RUN, start, run_attributes(manifest))
        totals, end = _Totals(), start + float(manifest.get("wall_s") or 0.0)
        for entry, frames in reader.tasks():
            sender.emit(task_span(frames, entry.result, start + entry.result.wall_s, facts), run)
            totals.add(entry.result)
            end = max(end, start + entry.result.wall_s)
        run.set_attributes(totals.attributes())
        sender.end(run, end)
    finally:
        sender.close()
    return sender.url, sender.sent


class LiveExport:
    """A run's spans sent as its tasks are written: `task_written` is the run store's listener."""

    def __init__(
        self,
        endpoint: str,
        manifest: dict[str, Any],
        specs: dict[str, str],
        prices: PriceTable,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._spans = Streamer(endpoint, str(manifest.get("run_id") or ""))
        self._facts = RunFacts(specs, prices)
        self._clock = clock
        self._run = self._spans.start(RUN, clock(), run_attributes(manifest))
        self._totals = _Totals()
        self.failed = 0
        """Tasks whose spans could not be made (logged): the spans are a view, and never stop a run."""

    @property
    def url(self) -> str:
        return self._spans.url

    def task_written(self, frames: list[bytes], result: Result) -> None:
        """One task, written: its spans, ending now, under the run's."""
        try:
            span = task_span([decode_frame(frame) for frame in frames], result, self._clock(), self._facts)
            self._spans.emit(span, self._run)
        except Exception:  # a fault in the view of a task must not stop the run that pays for the rest
            self.failed += 1
            log.warning("no spans for task %s", result.task_id, exc_info=True)
            return
        self._totals.add(result)

    def finish(self) -> None:
        """End the run's span and send what is queued."""
        self._run.set_attributes(self._totals.attributes())
        self._spans.end(self._run, self._clock())
        self._spans.close()
