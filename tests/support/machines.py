"""The settings of the pay-once state machines (tests/unit/rundir/test_store_machine.py,
tests/unit/backends/test_journal_machine.py, tests/unit/backends/test_cache_machine.py).

Derandomized, so every run replays the same sequences, and small enough that the unit suite stays quick.
``REDRAFT_MACHINE_EXAMPLES`` and ``REDRAFT_MACHINE_STEPS`` raise the counts for a longer search, e.g.
``REDRAFT_MACHINE_EXAMPLES=2000 REDRAFT_MACHINE_STEPS=60 pytest tests/unit -k machine``.
"""

from __future__ import annotations

import os
import re

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("REDRAFT_MACHINE_EXAMPLES", "150"))
"""Sequences tried per machine."""
STEPS = int(os.environ.get("REDRAFT_MACHINE_STEPS", "30"))
"""Steps (writes, kills, damage, reads, resumes) per sequence at most."""

MACHINE = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def bytes_said(said: str, name: str) -> int:
    """How many bytes a recovery's line says it set aside in ``name`` (0 when it names none)."""
    found = re.search(rf"(\d+) bytes set aside in {re.escape(name)}", said)
    return int(found.group(1)) if found else 0
