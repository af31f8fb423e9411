"""A scenario whose scripted models answer ``answer N``, for the adaptive strategy's simulations: the tests' and
the benchmark's subclasses say only how a task's answer is checked."""

from __future__ import annotations

import re
from collections.abc import Iterator

from redraft.protocols.messages import Task
from redraft.scenarios import Scenario

RIGHT = "42"
"""Every simulated task's right answer."""


class SimulatedAnswers(Scenario):
    """Tasks a test or benchmark makes itself; an answer is the number after ``answer``; the check is instant."""

    check_cost = "instant"

    def tasks(self, *, seed: int) -> Iterator[Task]:
        raise NotImplementedError("each simulation makes its own tasks")

    def system_prompt(self) -> str:
        return "Answer."

    def answer(self, text: str) -> str | None:
        found = re.search(r"answer (\d+)", text)
        return found[1] if found else None
