"""The heartbeat's patience follows the machine's load: an actor that answers late on a busy machine is slow, not
frozen, and is not killed for it (a machine at load 20-30 on 2 cores killed members every few minutes)."""

from __future__ import annotations

from redraft.actors._fleet import Fleet, patience


def test_a_quiet_machine_keeps_the_base_patience() -> None:
    assert patience(Fleet.hung_after_s, load=0.5, cpus=2) == Fleet.hung_after_s
    assert patience(Fleet.hung_after_s, load=2.0, cpus=2) == Fleet.hung_after_s


def test_a_busy_machine_stretches_it_by_its_load_per_core() -> None:
    assert patience(15.0, load=20.0, cpus=2) == 150.0
    assert patience(60.0, load=30.0, cpus=2) == 900.0
    assert patience(15.0, load=8.0, cpus=0) == 120.0  # an unknown CPU count counts as one
