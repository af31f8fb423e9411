"""What a scenario is: tasks, the prompt that asks for them, the feedback that steers and the grade that scores.

Two kinds of evidence, kept apart by design:

- `Scenario.check` is the **feedback**: what the loop may see, because a user has
  it at inference time (tests that are the specification, a schema, the database
  to run against, rules written in the task, a calculator). It reads
  ``task.reference`` only; the loop's tasks carry no gold (`Task.without_gold`).
- `Scenario.grade` is the **grade**: gold answers, hidden tests, read from
  ``task.gold``. It runs after the loop, on candidates the loop already chose,
  and is never shown to a role, nor used to rank, roll back or stop. A scenario
  whose rules are all in the prompt says ``feedback_is_grade``.

A scenario is a subclass of `Scenario`, registered by name with
`@scenario("name")`; the verifier role runs its `check`, the drafter role asks its
`system_prompt`, the grader its `grade`, a judge its `rubric`. Every capability a scenario may have is
declared on the base class with its default (stages, stage checks, the need for a
task file, the cost of its checks), so the code that uses a scenario asks it
directly and never probes. Third parties register theirs through the
``redraft.scenarios`` entry-point group (each entry point names a module;
importing it runs the decorators).

See docs/architecture.md, section "Oracle feedback".
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Literal

from redraft.errors import UserError, unknown_name
from redraft.plugins import Registry
from redraft.protocols.messages import CheckResult, Observation, StepRun, Task
from redraft.protocols.stages import DEFAULT_STAGES, Stage
from redraft.sandbox import SandboxLimits
from redraft.scenarios._steps import run_step

STEP_LIMITS = SandboxLimits(timeout_s=10.0, cpu_s=10, memory_mb=512, max_collect_bytes=2_000_000)

CheckCost = Literal["instant", "blocking", "executes"]
"""What one check (or grade) of a candidate costs: ``instant``, pure Python on the text that takes
microseconds and never blocks; ``blocking``, it may wait (a database, a file, a user's function);
``executes``, it runs the candidate as a program (a sandboxed process, a CPU while it runs)."""


class Scenario(abc.ABC):
    """A suite of tasks with feedback checks and a held-out grade; subclass it and override what differs."""

    name: str = ""
    """Registry name, e.g. ``arithmetic``: set by `@scenario("name")` (a family's instances set their own)."""
    check_cost: ClassVar[CheckCost] = "blocking"
    """What `check`, `check_stage` and `grade` cost (the actor system places verifiers and graders by it)."""
    feedback_is_grade: ClassVar[bool] = False
    """True when the feedback is itself the grade: every rule is written in the task (`grade` returns the
    checks' verdict)."""
    feedback_keys: ClassVar[frozenset[str]] = frozenset()
    """Keys of a task file's ``reference`` that the feedback may read (a schema, the prompt's code); every
    other key is held-out gold, for the grade only (`Scenario.split_reference`)."""
    needs_task_file: ClassVar[bool] = False
    """True when the scenario has no tasks of its own: a run must give ``--tasks``."""
    draft_tokens: ClassVar[int] = 0
    """The ``--max-tokens`` a useful answer needs (a program, a summary, a JSON object): a run that gives fewer
    is warned, once, with this reason (0: the default is enough)."""
    has_workspace: ClassVar[bool] = False
    """True when its tasks carry files that programs run over (`workspace`): a plan's steps
    (``plan_execute``) can then be executed and observed one at a time (`check_step`)."""
    step_limits: SandboxLimits = STEP_LIMITS
    """The sandbox's limits for one step of a plan."""

    hides_gold: ClassVar[bool] = False
    """True when a candidate that knew the scenario's public code and guessed the run's seed could rebuild its
    tasks' gold (a generator whose hidden parts come from the seed alone, and a candidate that runs as a
    program): a run then makes its tasks with `secret_tasks`, given the secret its directory keeps
    (`redraft.rundir.RunSecret`), which no role, prompt, frame or sandbox sees."""

    @abc.abstractmethod
    def tasks(self, *, seed: int) -> Iterator[Task]:
        """The scenario's tasks, in a stable order; generated ones depend only on ``seed``."""

    def secret_tasks(self, *, seed: int, secret: bytes) -> Iterator[Task]:
        """The tasks of a run, when `hides_gold`: those of `tasks`, their hidden parts drawn from ``secret`` as
        well as ``seed`` (the same for the same pair; a new secret makes new hidden parts). ``secret`` itself
        must reach no task: not its prompt, its reference nor its gold. The default has no hidden part."""
        return self.tasks(seed=seed)

    @abc.abstractmethod
    def system_prompt(self) -> str:
        """Instructions for the drafter (answer format included)."""

    @abc.abstractmethod
    def answer(self, text: str) -> str | None:
        """The candidate's final answer, normalised, for self-consistency agreement."""

    @abc.abstractmethod
    def check(self, task: Task, text: str) -> list[CheckResult]:
        """Feedback about ``text`` as an answer to ``task``, from what a user has (``task.reference``, the
        prompt), never gold. Must not raise for bad text."""

    def split_reference(self, reference: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """A task file's ``reference`` as (what the feedback may read, the held-out gold): by
        ``feedback_keys``; a scenario whose feedback is its grade keeps it all for the feedback."""
        if self.feedback_is_grade:
            return dict(reference), {}
        keys = self.feedback_keys
        return {k: v for k, v in reference.items() if k in keys}, {k: v for k, v in reference.items() if k not in keys}

    def grade(self, task: Task, text: str) -> CheckResult | None:
        """The held-out grade of ``text`` against ``task.gold``; None when the task has nothing to grade
        against. Must not raise for bad text. The default: the feedback's verdict if ``feedback_is_grade``."""
        if not self.feedback_is_grade:
            return None
        checks = self.check(task, text)
        failed = [c.detail for c in checks if not c.passed]
        passed = bool(checks) and not failed
        return CheckResult(name="grade", passed=passed, score=score_of(checks), detail="; ".join(failed)[:500])

    def rubric(self) -> dict[str, Any] | None:
        """The scenario's own rubric, as the table a rubric file holds (`redraft.judging.load_rubric`'s
        format), for a judge to grade its answers by after the loop; None when it has none. Like the grade, it
        is held out: no role of the loop reads it. The judge validates it (`redraft.judging.scenario_rubric`)."""
        return None

    def workspace(self, task: Task) -> dict[str, bytes]:
        """The files, by name, that a program answering ``task`` runs over (none unless `has_workspace`)."""
        return {}

    def check_step(self, task: Task, run: StepRun, text: str) -> tuple[list[CheckResult], Observation]:
        """Run ``text`` as the program of one plan step over `workspace` and the earlier steps' outputs: its
        checks (it ran, it wrote its file, the step's contract) and what the run showed. Must not raise for
        bad text."""
        if not self.has_workspace:
            raise UserError(f"scenario {self.name!r} has no files for a plan's steps to run over")
        return run_step(self.workspace(task), run, text, self.step_limits)

    def stages(self) -> list[Stage]:
        """The stages of a top-down (``stepwise``) solution, in order; the last one's output is the answer,
        checked by `check`. The default: outline, draft, polish."""
        return list(DEFAULT_STAGES)

    def check_stage(self, task: Task, stage: str, text: str) -> list[CheckResult]:
        """Hard evidence about the output of intermediate stage ``stage``. Must not raise for bad text.

        The default accepts any output of at least two non-empty lines (an outline, a first draft): what it
        cannot judge is left to the final stage's real check.
        """
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


_PROVIDED: dict[str, Scenario] = {}
"""Scenario instances made in this process rather than by name (a check given as a function), by name."""


def provide(made: Scenario) -> None:
    """Make ``get_scenario(made.name)`` answer ``made`` in this process (the actor system provides the same
    instances to every actor process it starts)."""
    _PROVIDED[made.name] = made


def provided() -> tuple[Scenario, ...]:
    """The instances `provide` was given in this process."""
    return tuple(_PROVIDED.values())


def get_scenario(name: str) -> Scenario:
    """A new instance of the scenario ``name`` (or the one `provide` was given); `UserError` listing the
    known ones otherwise.

    A name with a colon, ``prefix:rest``, goes to the family registered as
    ``prefix:PARAM``, whose factory gets ``rest`` (so the listed pattern itself,
    e.g. ``reasoning_gym:NAME``, is an ordinary, refused, parameter).
    """
    if name in _PROVIDED:
        return _PROVIDED[name]
    if ":" not in name:
        return _checked(name, SCENARIOS.get(name)())
    prefix, rest = name.split(":", 1)
    names = SCENARIOS.names()
    family = next((n for n in names if n.startswith(prefix + ":")), None)
    if family is None:  # a mistyped family is answered with the family meant, and the same parameter
        like = [n.split(":", 1)[0] + ":" + rest for n in names if ":" in n]
        raise unknown_name("scenario", name, names, like=like)
    if not rest:
        raise UserError(f"scenario {name!r} needs a parameter after the colon, as in {family!r}")
    return _checked(name, SCENARIOS.get(family)(rest))


def _checked(name: str, made: object) -> Scenario:
    """``made``, which must be a `Scenario`: a registration that makes anything else is refused by name."""
    if not isinstance(made, Scenario):
        raise UserError(
            f"scenario {name!r} made a {type(made).__name__}, not a redraft.scenarios.Scenario: subclass it"
        )
    return made


def score_of(checks: list[CheckResult]) -> float:
    """A candidate's score: the mean of its check scores (0 when there are none)."""
    if not checks:
        return 0.0
    return sum(c.score for c in checks) / len(checks)
