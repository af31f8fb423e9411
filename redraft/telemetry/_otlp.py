"""Span trees handed to the OpenTelemetry SDK and sent over OTLP/HTTP (redraft's ``otel`` extra).

The SDK is imported inside the functions, so that redraft without the extra imports this module; a
capability that needs it says which extra to install (`sdk`). Each export has a tracer provider of its
own, never the process's global one, so a program that embeds redraft keeps its own tracing as it was.

Two ways to send:

- `Sender` (``redraft export --format otel``): every span is sent, in batches of `BATCH` on the caller's
  thread, and a batch the endpoint does not take is a `UserError`: the command says it failed.
- `Streamer` (``redraft run --otel``): the SDK's batching processor sends from its own thread, so a slow
  or absent endpoint never slows a run; past `QUEUE` spans waiting, the SDK drops spans and logs it. A run's
  spans can be sent again, whole, afterwards with the export command.
"""

from __future__ import annotations

import importlib.metadata
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from redraft.errors import UserError, missing_extra
from redraft.telemetry._spans import SpanData

if TYPE_CHECKING:
    from opentelemetry import trace as trace_api
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.trace import Span

TRACES_PATH = "/v1/traces"
BATCH = 512
QUEUE = 16_384
TIMEOUT_S = 10.0
"""One export request's, retries of a refused or unanswered request included (the SDK's own)."""


def traces_url(endpoint: str) -> str:
    """The URL spans are posted to: ``endpoint`` itself, or with ``/v1/traces`` added when it has no path
    (``http://127.0.0.1:4318``, as collectors document their OTLP/HTTP port). `UserError` for one that is not
    an http(s) URL, or holds credentials (they go in ``OTEL_EXPORTER_OTLP_HEADERS``)."""
    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"the OTLP endpoint must be an http(s) URL such as http://127.0.0.1:4318, got {endpoint!r}")
    if parts.username or parts.password:  # the URL is in the manifest and in messages: secrets go in headers
        raise UserError("put the OTLP endpoint's credentials in OTEL_EXPORTER_OTLP_HEADERS, not in its URL")
    path = parts.path if parts.path not in ("", "/") else TRACES_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def sdk() -> Any:
    """The OTLP/HTTP span exporter's module, imported (`UserError` naming the extra when it is missing)."""
    try:
        from opentelemetry.exporter.otlp.proto.http import trace_exporter  # the SDK with it
    except ModuleNotFoundError:
        raise missing_extra("Sending spans to an OTLP endpoint (--otel, --format otel)", "otel") from None
    return trace_exporter


def _provider(run_id: str) -> TracerProvider:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    try:
        version = importlib.metadata.version("redraft")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a checkout, not installed
        version = "unknown"
    resource = Resource.create({"service.name": "redraft", "service.version": version, "redraft.run.id": run_id})
    return TracerProvider(resource=resource, shutdown_on_exit=False)


def emit(tracer: trace_api.Tracer, span: SpanData, parent: Context | None) -> Span:
    """Start and end ``span`` and every span under it, at their own times, under ``parent``."""
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode

    kind = SpanKind.CLIENT if span.client else SpanKind.INTERNAL
    made = tracer.start_span(span.name, parent, kind, span.attributes, start_time=_ns(span.start_s))
    if span.error is not None:
        made.set_status(Status(StatusCode.ERROR, span.error))
    inside = trace.set_span_in_context(made)
    for child in span.children:
        emit(tracer, child, inside)
    made.end(end_time=_ns(span.end_s))
    return made


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


class _Spans:
    """A tracer of its own, and how spans are made with it: trees at their times, or a span left open."""

    def __init__(self, endpoint: str, run_id: str) -> None:
        self.url = traces_url(endpoint)
        self._exporter = sdk().OTLPSpanExporter(endpoint=self.url, timeout=TIMEOUT_S)
        self._provider = _provider(run_id)
        self.tracer = self._provider.get_tracer("redraft")

    def start(self, name: str, start_s: float, attributes: dict[str, Any]) -> Span:
        """A span left open (the run's): its children are emitted under it as they come, its end is the caller's."""
        return self.tracer.start_span(name, attributes=attributes, start_time=_ns(start_s))

    def emit(self, span: SpanData, parent: Span | None = None) -> None:
        from opentelemetry import trace

        emit(self.tracer, span, None if parent is None else trace.set_span_in_context(parent))

    @staticmethod
    def end(span: Span, end_s: float) -> None:
        span.end(end_time=_ns(end_s))


class Sender(_Spans):
    """Sends every span, a batch at a time on the caller's thread; `UserError` when the endpoint refuses one."""

    def __init__(self, endpoint: str, run_id: str) -> None:
        super().__init__(endpoint, run_id)
        self._ended: list[ReadableSpan] = []
        self._provider.add_span_processor(_collector(self._ended))
        self.sent = 0

    def emit(self, span: SpanData, parent: Span | None = None) -> None:
        super().emit(span, parent)
        if len(self._ended) >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Send the spans ended so far; `UserError` if the endpoint does not take them."""
        from opentelemetry.sdk.trace.export import SpanExportResult

        batch = list(self._ended)
        self._ended.clear()
        if batch and self._exporter.export(batch) is not SpanExportResult.SUCCESS:
            raise UserError(
                f"the OTLP endpoint {self.url} did not take the spans ({self.sent:,} sent before): is a collector "
                "listening there, on OTLP/HTTP?"
            )
        self.sent += len(batch)

    def close(self) -> None:
        """Send what is left, then let the exporter go."""
        try:
            self.flush()
        finally:
            self._exporter.shutdown()


def _collector(into: list[ReadableSpan]) -> SpanProcessor:
    """A processor that keeps each span as it ends, for `Sender` to send."""
    from opentelemetry.sdk.trace import SpanProcessor

    class Collector(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            into.append(span)

    return Collector()


class Streamer(_Spans):
    """Sends spans from the SDK's own thread as they end; `close` waits for what is queued (30 s at most, the
    SDK's bound on a processor's shutdown)."""

    def __init__(self, endpoint: str, run_id: str) -> None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        super().__init__(endpoint, run_id)
        processor = BatchSpanProcessor(self._exporter, max_queue_size=QUEUE, max_export_batch_size=BATCH)
        self._provider.add_span_processor(processor)

    def close(self) -> None:
        self._provider.shutdown()  # sends what is queued, within the SDK's own timeout
