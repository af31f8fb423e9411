"""Ray Data's LLM HTTP processor on the benchmark's tasks: one chat request per row, no refinement; one JSON line out.

Run by ``bench_peers.py`` under the peers' own virtualenv (``ray[data]``, the same
Ray version as redraft's). It starts a fresh local Ray of its own
(``ray.init(address="local", num_cpus=2)``, ``RAY_ADDRESS`` dropped), whatever
other Ray runs on the machine, and shuts it down before printing.

``ray.data.llm.HttpRequestProcessorConfig`` + ``build_processor`` post each row's
chat payload to ``URL/v1/chat/completions``. How IN_FLIGHT requests get out at once
(Ray 2.60; read in its source and measured against the fake server):

- the HTTP stage sends the requests of one batch one after the other, each answered
  before the next is sent, and ``qps`` only paces those (per batch): it cannot add
  concurrency, and at ``batch_size=1`` it would only add a 1/qps wait before each
  request, so it is left unset (no pacing);
- ``concurrency`` is the number of actors, each a process; IN_FLIGHT actors do not fit
  on 2 cores (tried at 16: a pool growing to 16 actors of 0.1 CPU made 8 calls/s of
  the 80 allowed, a fixed pool of 16 had sent no request after 5 minutes), so there
  are ``ACTORS`` = 2, ``num_cpus=0.5`` each (the pre- and post-processing tasks keep
  a core);
- an actor runs up to ``RAY_DATA_DEFAULT_ASYNC_BATCH_UDF_MAX_CONCURRENCY`` batches of
  its task at once (4 by default: 8 in flight with 2 actors); it is set to
  IN_FLIGHT / ACTORS, with ``batch_size=1``, and the rows are in ``ACTORS`` blocks so
  each actor's task holds enough rows to keep that many going.

Usage: ``run_ray_data.py URL TASKS_JSON IN_FLIGHT ROWS``: ROWS chat requests, the
tasks' prompts over and over. Prints ``{"system": "ray_data", "rows": ...,
"answered": ..., "cpu_s": ..., "wall_s": ...}`` (CPU of the driver process only; the
actors' is not counted).
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from typing import Any

ACTORS = 2


def main() -> None:
    url, tasks_path, in_flight, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with open(tasks_path) as f:
        spec = json.load(f)
    prompts = [t["prompt"] for t in spec["tasks"]]
    system = spec["system"]

    os.environ.pop("RAY_ADDRESS", None)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Read by the actors at import: the raylet started below, and so its workers, inherit it.
    os.environ["RAY_DATA_DEFAULT_ASYNC_BATCH_UDF_MAX_CONCURRENCY"] = str(math.ceil(in_flight / ACTORS))

    import ray
    from ray.data.llm import HttpRequestProcessorConfig, build_processor

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        config = HttpRequestProcessorConfig(
            url=f"{url}/v1/chat/completions",
            headers={"Authorization": "Bearer none"},
            concurrency=(ACTORS, ACTORS),
            batch_size=1,
            qps=None,
            http_request_stage={"num_cpus": 0.5},
        )

        def preprocess(row: dict[str, Any]) -> dict[str, Any]:
            messages = [{"role": "system", "content": system}, {"role": "user", "content": row["prompt"]}]
            return {"payload": {"model": "fake", "messages": messages, "temperature": 0.8}}

        def postprocess(row: dict[str, Any]) -> dict[str, Any]:
            return {"answer": row["http_response"]["choices"][0]["message"]["content"]}

        processor = build_processor(config, preprocess=preprocess, postprocess=postprocess)
        items = [{"prompt": prompts[i % len(prompts)]} for i in range(rows)]
        wall, cpu = time.time(), time.process_time()
        answers = processor(ray.data.from_items(items, override_num_blocks=ACTORS)).take_all()
        wall, cpu = time.time() - wall, time.process_time() - cpu
    finally:
        ray.shutdown()
    answered = sum(1 for a in answers if a.get("answer"))
    out = {"system": "ray_data", "rows": rows, "answered": answered, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
