"""Where code runs: one answer to "a Ray handle or an object?" and "inside a Ray worker?", outside Ray here."""

from __future__ import annotations

import asyncio

from redraft.runtime import call, in_process_services, in_ray_worker, node_service


class Counter:
    def __init__(self, start: int) -> None:
        self.value = start

    async def add(self, n: int) -> int:
        self.value += n
        return self.value


def test_call_awaits_a_plain_objects_method() -> None:
    assert asyncio.run(call(Counter(1), "add", 2)) == 3


def test_outside_ray_a_service_is_one_object_of_this_process_per_name() -> None:
    assert not in_ray_worker()
    first = node_service(Counter, "test-counter", 10, per_node=True, num_cpus=0)
    again = node_service(Counter, "test-counter", 99, per_node=True, num_cpus=0)
    other = node_service(Counter, "test-counter-2", 0, per_node=False)
    assert first is again and first.value == 10 and other is not first
    assert in_process_services()["test-counter"] is first
