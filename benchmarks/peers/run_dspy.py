"""DSPy's refinement loop on the benchmark's tasks: ``dspy.Refine`` under ``dspy.Parallel``; one JSON line out.

Run by ``bench_peers.py`` under the peers' own virtualenv (DSPy is not a redraft
dependency). Each task is ``dspy.Refine(dspy.Predict(Solve), N=3, reward_fn,
threshold=1.0)``: up to 3 attempts, one after the other, with DSPy's feedback call
(``OfferFeedback``) between two attempts; the reward is 1.0 when the answer is the
task's gold integer. ``dspy.Parallel(num_threads=IN_FLIGHT)`` runs the tasks, so at
most IN_FLIGHT requests are out at once (one per task). The LM is ``dspy.LM`` over
litellm with its cache off, DSPy's default ChatAdapter formatting the prompts.

Usage: ``run_dspy.py URL TASKS_JSON IN_FLIGHT`` (TASKS_JSON: ``{"system": ..., "tasks":
[{"prompt": ..., "answer": int}, ...]}``). Prints ``{"system": "dspy", "tasks": ...,
"rewarded": ..., "failed": ..., "cpu_s": ..., "wall_s": ...}``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

# The bundled model-metadata snapshot, not a download: the benchmark has no network but the loopback.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy

ATTEMPTS = 3


def main() -> None:
    url, tasks_path, in_flight = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(tasks_path) as f:
        spec = json.load(f)
    gold = {t["prompt"]: t["answer"] for t in spec["tasks"]}
    # DSPy's own warnings (Refine passes its feedback inputs as strings) would drown the output.
    logging.getLogger("dspy").setLevel(logging.ERROR)

    solve = dspy.Signature("question -> answer", spec["system"])

    def reward(args: dict[str, Any], pred: Any) -> float:
        try:
            return 1.0 if int(str(pred.answer).strip()) == gold[args["question"]] else 0.0
        except ValueError:
            return 0.0

    dspy.configure(
        lm=dspy.LM("openai/fake", api_base=f"{url}/v1", api_key="none", cache=False, num_retries=0),
        adapter=dspy.ChatAdapter(),
    )
    refine = dspy.Refine(dspy.Predict(solve), N=ATTEMPTS, reward_fn=reward, threshold=1.0)
    pairs = [(refine, dspy.Example(question=t["prompt"]).with_inputs("question")) for t in spec["tasks"]]
    parallel = dspy.Parallel(num_threads=in_flight, max_errors=len(pairs) + 1, disable_progress_bar=True)

    wall, cpu = time.time(), time.process_time()
    results = parallel(pairs)
    wall, cpu = time.time() - wall, time.process_time() - cpu
    done = [r for r in results if r is not None]
    rewarded = sum(
        1 for t, r in zip(spec["tasks"], results, strict=True) if r is not None and reward({"question": t["prompt"]}, r)
    )
    out = {"system": "dspy", "tasks": len(pairs), "rewarded": rewarded, "failed": len(pairs) - len(done)}
    print(json.dumps(out | {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}), flush=True)


if __name__ == "__main__":
    main()
