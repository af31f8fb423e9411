"""The batched host's thread count (`redraft.backends._llama_threads`), on scripted clocks: halved when the
decoding thread waits for cores, tried higher again when it has its core and the machine has idle ones, and a
failed try waiting twice as long before the next."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from redraft.backends._llama_threads import LONGEST_WAIT, WINDOW_S, MachineIdle, ThreadGovernor


class Machine:
    """Scripted clocks: each decode takes one window of wall time and ``share`` of it on a CPU."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.share = 1.0
        self.idle: float | None = 1.0

    def governor(self, most: int) -> ThreadGovernor:
        return ThreadGovernor(most, idle_cores=lambda: self.idle, clock=lambda: self.wall, on_cpu=lambda: self.cpu)

    def windows(self, governor: ThreadGovernor, count: int) -> list[int]:
        """The thread count each of ``count`` windows decoded with."""
        seen = []
        for _ in range(count):
            seen.append(governor.threads)
            governor.timed(self._decode)
        return seen

    def _decode(self) -> None:
        self.wall += WINDOW_S
        self.cpu += WINDOW_S * self.share


def test_a_quiet_machine_keeps_every_thread() -> None:
    machine = Machine()
    governor = machine.governor(4)
    assert machine.windows(governor, 10) == [4] * 10
    assert governor.changes == 0


def test_crowded_cores_halve_the_threads_down_to_one() -> None:
    machine = Machine()
    machine.share = 0.4  # the decoding thread on a CPU 40 % of the time: it waits for cores
    governor = machine.governor(8)
    assert machine.windows(governor, 5) == [8, 4, 2, 1, 1]


def test_fewer_threads_that_have_their_cores_stay_while_the_machine_has_no_idle_core() -> None:
    machine = Machine()
    machine.share = 0.4
    governor = machine.governor(2)
    machine.windows(governor, 1)
    machine.share, machine.idle = 1.0, 0.1  # one thread runs, but the other core is busy with other work
    assert machine.windows(governor, 5) == [1] * 5


def test_each_new_count_is_applied_once_as_it_is_decided() -> None:
    machine = Machine()
    applied: list[int] = []
    governor = ThreadGovernor(
        8, apply=applied.append, idle_cores=lambda: 8.0, clock=lambda: machine.wall, on_cpu=lambda: machine.cpu
    )
    machine.share = 0.4
    machine.windows(governor, 4)
    machine.share = 1.0
    machine.windows(governor, 5)  # a try, then a window that keeps it, each step up
    assert applied == [4, 2, 1, 2, 4, 8]  # never the count it already has
    assert governor.changes == len(applied)


def test_when_the_load_goes_the_threads_come_back() -> None:
    machine = Machine()
    machine.share = 0.4
    governor = machine.governor(2)
    machine.windows(governor, 1)
    machine.share, machine.idle = 1.0, 1.0
    assert machine.windows(governor, 4) == [1, 2, 2, 2]  # tried after one window, and kept: it ran


def test_a_failed_try_waits_twice_as_long_before_the_next_up_to_a_bound() -> None:
    machine = Machine()
    machine.share = 0.4
    governor = machine.governor(2)
    machine.windows(governor, 1)  # down to one thread
    tries = []
    for _ in range(400):
        # One thread has its core; two do not: the other work takes the rest.
        machine.share = 1.0 if governor.threads == 1 else 0.5
        before = governor.threads
        machine.windows(governor, 1)
        if before == 1 and governor.threads == 2:
            tries.append(machine.wall / WINDOW_S)
    gaps = [round(b - a) for a, b in itertools.pairwise(tries)]
    assert gaps[:6] == [3, 4, 6, 10, 18, 34]  # a try, a window back at one thread, then the waits: 1, 2, 4, 8, ...
    assert max(gaps) == LONGEST_WAIT + 2


def test_an_unknown_idle_count_lets_a_try_go_ahead() -> None:
    machine = Machine()
    machine.share = 0.4
    governor = machine.governor(2)
    machine.windows(governor, 1)
    machine.share, machine.idle = 1.0, None  # no /proc/stat here
    assert machine.windows(governor, 2) == [1, 2]


def test_the_machine_idle_cores_come_from_proc_stat_deltas(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    idle = MachineIdle(str(stat))
    assert idle() is None  # no file
    stat.write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3\n")
    assert idle() is None  # a first reading has nothing to compare with
    stat.write_text("cpu  150 0 150 900 0 0 0 0 0 0\n")  # 200 jiffies: 100 idle
    assert idle() == 0.5 * (os.cpu_count() or 1)
    stat.write_text("cpu  garbage\n")
    assert idle() is None
