"""A tiny OTLP/HTTP trace receiver on 127.0.0.1: what an OpenTelemetry collector is to redraft's span export.

It answers ``POST /v1/traces`` as a collector does (``200`` and an empty ``ExportTraceServiceResponse``),
parses each body with the opentelemetry-proto classes (gzip too), and keeps every span it received, flat,
with its ids in hex, its attributes as Python values and the resource's attributes beside them::

    with OTLPReceiver() as receiver:
        ...  # redraft export RUN --format otel --endpoint {receiver.url}
        [run] = receiver.roots()

``fail_status`` answers every request with that status instead (a collector that refuses).

`spans_match_results` holds the contract a run's spans keep with its run directory, for the tests of both
ways of sending them (afterwards, and as the run goes).
"""

from __future__ import annotations

import gzip
import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from redraft.protocols.messages import Result
from redraft.rundir import RunReader

SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT = 1, 3
STATUS_CODE_ERROR = 2


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    """Empty for a root span."""
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int
    status_message: str
    resource: dict[str, Any]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


class OTLPReceiver:
    """A threaded OTLP/HTTP receiver in the background; a context manager that starts and stops it."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.fail_status: int | None = None
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.receiver = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="otlp-receiver", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> OTLPReceiver:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        found = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes=_attributes(span.attributes),
                            status_code=span.status.code,
                            status_message=span.status.message,
                            resource=resource,
                        )
                    )
        with self._lock:
            self.requests += 1
            self.spans.extend(found)

    def roots(self) -> list[ReceivedSpan]:
        return [span for span in self.spans if not span.parent_id]

    def children(self) -> dict[str, list[ReceivedSpan]]:
        """Each span's children by its id, in the order they arrived."""
        found: dict[str, list[ReceivedSpan]] = defaultdict(list)
        for span in self.spans:
            if span.parent_id:
                found[span.parent_id].append(span)
        return found


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        receiver: OTLPReceiver = self.server.receiver  # type: ignore[attr-defined]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if receiver.fail_status is not None or self.path != "/v1/traces":
            self._send(receiver.fail_status or 404, b"")
            return
        receiver.take(body)
        self._send(200, ExportTraceServiceResponse().SerializeToString())

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def descendants(span: ReceivedSpan, children: dict[str, list[ReceivedSpan]]) -> Iterator[ReceivedSpan]:
    for child in children.get(span.span_id, []):
        yield child
        yield from descendants(child, children)


def spans_match_results(receiver: OTLPReceiver, run_dir: Path) -> dict[str, ReceivedSpan]:
    """Assert the spans received are the run's: one run span over one span per task, a round span per round,
    a call span per model call, each call's tokens and cost summing to its task's result, overall and by role,
    every child inside its parent's time; the task spans by task id."""
    [run] = receiver.roots()
    children = receiver.children()
    results: dict[str, Result] = {entry.task_id: entry.result for entry in RunReader(run_dir).entries()}
    assert run.name == "redraft.run" and run.kind == SPAN_KIND_INTERNAL
    assert run.resource["service.name"] == "redraft"
    tasks = {span.attributes["redraft.task.id"]: span for span in children[run.span_id]}
    assert {span.name for span in tasks.values()} == {"redraft.task"} and tasks.keys() == results.keys()
    assert {span.trace_id for span in receiver.spans} == {run.trace_id}
    for task_id, task in tasks.items():
        result = results[task_id]
        rounds = [r for r in children[task.span_id] if r.name == "redraft.round"]
        judged = [c for c in children[task.span_id] if c.name != "redraft.round"]  # a judge's, after the loop
        assert [r.attributes["redraft.round"] for r in rounds] == list(range(result.rounds))
        assert all(c.attributes["redraft.role"] == "judge" for c in judged)
        calls = [c for r in rounds for c in children[r.span_id]] + judged
        assert all(c.kind == SPAN_KIND_CLIENT and c.attributes["gen_ai.operation.name"] == "chat" for c in calls)
        assert all(c.name == f"chat {c.attributes['gen_ai.request.model']}" for c in calls)
        assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in calls) == result.usage.input_tokens
        assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in calls) == result.usage.output_tokens
        assert sum(c.attributes["redraft.calls"] for c in calls) == result.usage.calls
        assert sum(c.attributes["redraft.cost_usd"] for c in calls) == pytest.approx(result.usage.cost_usd)
        assert task.attributes["redraft.cost_usd"] == pytest.approx(result.usage.cost_usd)
        assert task.attributes["redraft.stop_reason"] == result.stop_reason
        for role, usage in result.usage_by_role.items():
            mine = [c for c in calls if c.attributes["redraft.role"] == role]
            assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in mine) == usage.input_tokens, role
            assert sum(c.attributes["redraft.cost_usd"] for c in mine) == pytest.approx(usage.cost_usd), role
        assert {c.attributes["redraft.role"] for c in calls} == set(result.usage_by_role)
        assert (task.end_ns - task.start_ns) / 1e9 == pytest.approx(result.wall_s, abs=1e-6)
        for parent in (run, task, *rounds):
            for child in children.get(parent.span_id, []):
                assert parent.start_ns <= child.start_ns <= child.end_ns <= parent.end_ns, (parent.name, child.name)
    assert run.attributes["redraft.tasks"] == len(results)
    assert run.attributes["redraft.cost_usd"] == pytest.approx(sum(r.usage.cost_usd for r in results.values()))
    return tasks
