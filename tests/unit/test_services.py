"""A backend's shared objects in a plain process: one object per name, called alike whatever it is."""

from __future__ import annotations

import asyncio

from redraft import services


class Counter:
    def __init__(self, start: int) -> None:
        self.value = start

    async def add(self, n: int) -> int:
        self.value += n
        return self.value

    def peek(self) -> int:
        return self.value


def test_call_awaits_a_coroutine_method_and_returns_a_plain_ones_value() -> None:
    here = services.InProcess()
    counter = here.shared(Counter, "c", 1, per_node=False)
    assert asyncio.run(here.call(counter, "add", 2)) == 3
    assert asyncio.run(here.call(counter, "peek")) == 3


def test_in_a_plain_process_a_service_is_one_object_per_name() -> None:
    assert services.current() is services.IN_PROCESS  # nothing installed other services in the test process
    first = services.current().shared(Counter, "test-counter", 10, per_node=True, num_cpus=0)
    again = services.current().shared(Counter, "test-counter", 99, per_node=True, num_cpus=0)
    other = services.current().shared(Counter, "test-counter-2", 0, per_node=False)
    assert first is again and first.value == 10 and other is not first
    assert services.IN_PROCESS.objects["test-counter"] is first
    assert services.current().node() == ""
