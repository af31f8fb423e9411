"""An actor process is set up for its calls as it starts: Ray's serialization built (a worker without it builds
it on its first call that pickles, importing pyarrow, numpy and pydantic meanwhile: up to a second of a run's
first tasks, on every actor of a fleet at once), and what start-up made frozen out of the collector's way."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.ray


def test_an_actor_s_serialization_is_built_and_its_start_up_frozen_before_any_call(ray_cluster: Any) -> None:
    import ray

    @ray.remote(num_cpus=0)
    class Fresh:
        def __init__(self) -> None:
            import gc

            import ray._private.worker as ray_worker

            from redraft.actors._ray import set_up_actor_process

            worker = ray_worker.global_worker
            job = worker.current_job_id
            worker.serialization_context_map.pop(job, None)  # as in a worker that has pickled nothing yet
            set_up_actor_process()
            self.seen = (job in worker.serialization_context_map, gc.get_freeze_count())

        def set_up(self) -> tuple[bool, int]:
            return self.seen

    actor = Fresh.remote()  # type: ignore[attr-defined]
    try:
        built, frozen = ray.get(actor.set_up.remote(), timeout=120)
    finally:
        ray.kill(actor)
    assert built
    assert frozen > 10_000  # the modules imported so far, Ray's and redraft's
