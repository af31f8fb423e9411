"""What a scenario is: tasks, the prompt that asks for them, and the checks that judge them.

A scenario is a plain object registered by name with `@scenario("name")`; the
verifier role runs its `check`, the drafter role asks its `system_prompt`. Third
parties register theirs through the ``redraft.scenarios`` entry-point group
(each entry point names a module; importing it runs the decorators).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, runtime_checkable

from redraft.plugins import Registry
from redraft.protocols.messages import CheckResult, Task


@runtime_checkable
class Scenario(Protocol):
    """A suite of tasks with deterministic checks."""

    name: str
    """Registry name, e.g. ``arithmetic``."""
    verifier_num_cpus: float
    """CPUs a verifier actor reserves: 0 for cheap checks, 1 for ones that execute code."""

    def tasks(self, *, seed: int) -> Iterator[Task]:
        """The scenario's tasks, in a stable order; generated ones depend only on ``seed``."""
        ...

    def system_prompt(self) -> str:
        """Instructions for the drafter (answer format included)."""
        ...

    def answer(self, text: str) -> str | None:
        """The candidate's final answer, normalised, for self-consistency agreement."""
        ...

    def check(self, task: Task, text: str) -> list[CheckResult]:
        """Hard evidence about ``text`` as an answer to ``task``. Must not raise for bad text."""
        ...


SCENARIOS: Registry[Callable[[], Scenario]] = Registry("scenario", "redraft.scenarios")
scenario = SCENARIOS.register
"""Register a scenario factory (a class or a function returning a `Scenario`): ``@scenario("name")``."""


def scenario_names() -> list[str]:
    return SCENARIOS.names()


def get_scenario(name: str) -> Scenario:
    """A new instance of the registered scenario ``name``; `UserError` listing the known ones otherwise."""
    return SCENARIOS.get(name)()


def score_of(checks: list[CheckResult]) -> float:
    """A candidate's score: the mean of its check scores (0 when there are none)."""
    if not checks:
        return 0.0
    return sum(c.score for c in checks) / len(checks)
