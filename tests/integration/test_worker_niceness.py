"""A local Ray that redraft starts runs its workers, the model host among them, at the driver's priority: a real
Ray started by `ensure_ray` in a process of its own, under ``nice``, and an actor asked its niceness. Ray's
default would have made it 15 steps nicer than the driver (capped at 19)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = """
import json, os
import ray
from redraft.actors import ensure_ray

ensure_ray(None)

@ray.remote(num_cpus=0)
class Asked:
    def niceness(self) -> int:
        return os.nice(0)

print(json.dumps({"driver": os.nice(0), "worker": ray.get(Asked.remote().niceness.remote(), timeout=300)}))
ray.shutdown()
"""


def test_a_local_ray_runs_its_workers_at_the_driver_s_niceness() -> None:
    step = 3 if os.nice(0) <= 16 else 0
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_worker_niceness", "REDRAFT_WORKER_NICENESS")}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        ["nice", "-n", str(step), sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["driver"] == os.nice(0) + step
    assert seen["worker"] == seen["driver"]
