"""What a scenario is: tasks, the prompt that asks for them, and the checks that judge them.

A scenario is a plain object registered by name with `@scenario("name")`; the
verifier role runs its `check`, the drafter role asks its `system_prompt`. Third
parties register theirs through the ``redraft.scenarios`` entry-point group
(each entry point names a module; importing it runs the decorators).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, runtime_checkable

from redraft.errors import UserError
from redraft.plugins import Registry
from redraft.protocols.messages import CheckResult, Task
from redraft.protocols.stages import DEFAULT_STAGES, Stage


@runtime_checkable
class Scenario(Protocol):
    """A suite of tasks with deterministic checks. A class may subclass this to take its defaults."""

    name: str
    """Registry name, e.g. ``arithmetic``: set by `@scenario("name")` (a family's instances set their own)."""
    verifier_num_cpus: float = 0.0
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


class StagedScenario(Protocol):
    """A scenario that declares its own stages and the checks of its intermediate stages (optional)."""

    def stages(self) -> list[Stage]:
        """The stages in order; the last one's output is the answer, checked by `Scenario.check`."""
        ...

    def check_stage(self, task: Task, stage: str, text: str) -> list[CheckResult]:
        """Hard evidence about the output of intermediate stage ``stage``. Must not raise for bad text."""
        ...


def stages_of(scenario: Scenario) -> list[Stage]:
    """The scenario's declared stages, else `DEFAULT_STAGES`."""
    declared = getattr(scenario, "stages", None)
    return list(declared()) if callable(declared) else list(DEFAULT_STAGES)


def check_stage(scenario: Scenario, task: Task, stage: str, text: str) -> list[CheckResult]:
    """Check the output of an intermediate stage: the scenario's `check_stage`, else a structural default.

    The default accepts any non-empty output of at least two lines (an outline,
    a first draft): what it cannot judge is left to the final stage's real check.
    """
    own = getattr(scenario, "check_stage", None)
    if callable(own):
        checks: list[CheckResult] = own(task, stage, text)
        return checks
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) >= 2:
        return [CheckResult(name=f"{stage}_present", passed=True, score=1.0, detail=f"{len(lines)} lines")]
    detail = f"the {stage} is empty or a single line; write it out as several lines"
    return [CheckResult(name=f"{stage}_present", passed=False, score=0.0, detail=detail)]


SCENARIOS: Registry[Callable[..., Scenario]] = Registry("scenario", "redraft.scenarios")
scenario = SCENARIOS.register
"""Register a scenario factory: ``@scenario("name")`` on a class or function taking no argument, or
``@scenario("prefix:PARAM")`` on one taking the text after ``prefix:`` (a parametrized family, e.g.
``reasoning_gym:NAME`` makes ``reasoning_gym:leg_counting``)."""


def scenario_names() -> list[str]:
    """Registered names, sorted; a parametrized family is listed by its pattern (``reasoning_gym:NAME``)."""
    return SCENARIOS.names()


def get_scenario(name: str) -> Scenario:
    """A new instance of the scenario ``name``; `UserError` listing the known ones otherwise.

    A name with a colon, ``prefix:rest``, goes to the family registered as
    ``prefix:PARAM``, whose factory gets ``rest`` (so the listed pattern itself,
    e.g. ``reasoning_gym:NAME``, is an ordinary, refused, parameter).
    """
    if ":" not in name:
        return SCENARIOS.get(name)()
    prefix, rest = name.split(":", 1)
    family = next((n for n in SCENARIOS.names() if n.startswith(prefix + ":")), None)
    if family is None:
        return SCENARIOS.get(name)()  # raises, listing the known names
    if not rest:
        raise UserError(f"scenario {name!r} needs a parameter after the colon, as in {family!r}")
    return SCENARIOS.get(family)(rest)


def score_of(checks: list[CheckResult]) -> float:
    """A candidate's score: the mean of its check scores (0 when there are none)."""
    if not checks:
        return 0.0
    return sum(c.score for c in checks) / len(checks)
