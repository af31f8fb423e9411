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
replies     a finished loop as the client reads it, or the error it stands for
app         the ASGI app (FastAPI): the routes, streaming, disconnects, timeouts
deployment  the app as a Ray Serve deployment: replicas, autoscaling, Ray metrics (the one module with Ray)
```
"""

from redraft.serving._app import make_app
from redraft.serving._guard import CountedMetrics, Metrics, PeriodSpending, Spending
from redraft.serving._openai import APIError
from redraft.serving._settings import LOOPBACK, ServeSettings, digest, key_digests, named_pairs

__all__ = [
    "LOOPBACK",
    "APIError",
    "CountedMetrics",
    "Metrics",
    "PeriodSpending",
    "ServeSettings",
    "Spending",
    "digest",
    "key_digests",
    "make_app",
    "named_pairs",
]
