"""A run's trace as OpenTelemetry spans, in the GenAI semantic conventions, sent to any OTLP/HTTP endpoint.

```
_spans    one task's frames as a tree of spans: task, rounds, each role's model call (no OpenTelemetry)
_otlp     the trees handed to the OpenTelemetry SDK (the ``otel`` extra, imported lazily) and sent
_export   a run read back from its directory (`export_run`), or each task as it is written (`LiveExport`)
```

The spans are a view of the run directory's frames, as the report is: they add nothing the trace does
not hold, and a run neither waits for nor fails because of them.
"""

from redraft.telemetry._export import LiveExport, export_run
from redraft.telemetry._otlp import sdk, traces_url
from redraft.telemetry._spans import GEN_AI, RunFacts, SpanData, task_span

__all__ = ["GEN_AI", "LiveExport", "RunFacts", "SpanData", "export_run", "sdk", "task_span", "traces_url"]
