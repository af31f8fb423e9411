"""Refine one task in this process, with no Ray: for notebooks, scripts and tests.

The roles are plain objects of this process (`LocalMember`s), the loop runs on
the caller's event loop (`refine_async`) or on one of its own (`refine`), and the
held-out grade follows the loop exactly as it does on a cluster: the loop sees
the task without its gold, the grader sees the candidates afterwards.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from redraft.backends.pricing import PriceTable
from redraft.config import RunConfig
from redraft.engine.arbiter import Arbiter, ArbiterSettings
from redraft.engine.grader import Grader, GradeRole, grade_request, graded
from redraft.engine.pools import LocalMember, Roles
from redraft.engine.resolution import BackendOverrides, Cast, resolve_run, with_check
from redraft.protocols.messages import Grade, Message, Result, Task
from redraft.scenarios.user_check import CheckFunction

T = TypeVar("T")


@dataclass
class Refinement:
    """One refined task: its result and every message of its trace."""

    result: Result
    trace: list[Message]


def refine(
    task: Task,
    config: RunConfig | None = None,
    *,
    check: CheckFunction | None = None,
    grade: CheckFunction | None = None,
    backends: BackendOverrides | None = None,
) -> Refinement:
    """Refine one task in this process (no Ray): the task's scenario gives the feedback, and its gold, if it
    has any, the held-out grade after the loop; or ``check`` gives the feedback and ``grade`` the grade,
    functions ``(text, data)`` or ``(text, data, prompt)`` returning a score in [0, 1] or (score, detail).

    It may be called from inside a running event loop (a notebook): the loop then runs on a thread of its own.

    Example, with the deterministic scripted model in place of a real one:

        >>> from redraft import RunConfig, Task, refine
        >>> from redraft.backends.scripted import ScriptedSpec
        >>> def says_42(text, data):
        ...     return "42" in text, "the product of 6 and 7 is not in the answer"
        >>> task = Task(task_id="q1", scenario="check", prompt="What is 6 times 7?")
        >>> model = ScriptedSpec(script=lambda request: "6 times 7 is 42.")
        >>> done = refine(task, RunConfig.build(samples=1), check=says_42, backends={"drafter": model, "critic": model})
        >>> done.result.passed, done.result.rounds
        (True, 1)
    """
    return run_blocking(refine_async(task, config, check=check, grade=grade, backends=backends))


def run_blocking(work: Coroutine[Any, Any, T], name: str = "redraft-refine") -> T:
    """``work`` on an event loop of its own (on a thread of its own, named ``name``, when the caller's loop
    runs: a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=name) as pool:
        return pool.submit(asyncio.run, work).result()


async def refine_async(
    task: Task,
    config: RunConfig | None = None,
    *,
    check: CheckFunction | None = None,
    grade: CheckFunction | None = None,
    backends: BackendOverrides | None = None,
) -> Refinement:
    """`refine`, awaited on the caller's event loop.

    >>> import asyncio
    >>> from redraft import RunConfig, Task, refine_async
    >>> from redraft.backends.scripted import ScriptedSpec
    >>> task = Task(task_id="q1", scenario="check", prompt="What is 6 times 7?")
    >>> model = ScriptedSpec(script=lambda request: "42")
    >>> config = RunConfig.build(samples=1)
    >>> check = lambda text, data: text == "42"
    >>> done = asyncio.run(refine_async(task, config, check=check, backends={"drafter": model, "critic": model}))
    >>> done.result.text
    '42'
    """
    config = with_check(config or RunConfig(), check, grade)
    if check is not None:
        task = msgspec.structs.replace(task, scenario=config.experiment.scenario)
    run = resolve_run(config.replace(scenario=task.scenario), backends=backends, task=task)
    arbiter = Arbiter(local_roles(run.cast, run.settings), run.settings)
    judge: GradeRole | None = None
    if run.setup.judge is not None:
        cls, args, kwargs = run.cast.grader
        judge = cls(*args, **kwargs)
    trace = await refine_trace(
        arbiter,
        Grader(run.setup.scenario),
        task,
        oracle=run.experiment.oracle_feedback,
        timeout_s=run.budgets.task_timeout,
        judge=judge,
        prices=run.settings.prices,
        every_sample=run.experiment.max_rounds == 1,
    )
    result = trace[-1]
    assert isinstance(result, Result)
    return Refinement(result=result, trace=trace)


def local_roles(cast: Cast, settings: ArbiterSettings | None = None) -> Roles:
    """The roles of ``cast`` as plain objects of this process, their calls bounded as ``settings`` say."""
    made = cast.roles.items()
    settings = settings or ArbiterSettings()
    return Roles.of(
        {name: [LocalMember(cls(*args, **kwargs))] for name, (cls, args, kwargs) in made},
        deadline_s=settings.call_deadline_s,
        paced=settings.paced_roles,
    )


async def refine_trace(
    arbiter: Arbiter,
    grader: Grader,
    task: Task,
    *,
    oracle: bool = False,
    timeout_s: float | None = None,
    judge: GradeRole | None = None,
    prices: PriceTable | None = None,
    every_sample: bool = False,
) -> list[Message]:
    """One task through an arbiter and a grader of this process: the loop on the task without its gold (unless
    ``oracle``), then the held-out grade (the ``judge``'s, when given, its calls priced by ``prices``, of every
    sample with ``every_sample``: `redraft.engine.grader.grade_request`); every message of its trace, the graded
    `Result` last."""
    seen = task if oracle else task.without_gold()  # the loop never sees the gold
    trace = await arbiter.run(seen, timeout_s)
    request = grade_request(grader.scenario, task, trace, judged=judge is not None, every_sample=every_sample)
    if request is None:
        return trace
    result = trace[-1]
    assert isinstance(result, Result)
    grade = await judge.serve(request) if judge is not None else await grader.grade(request)
    assert isinstance(grade, Grade)
    ending, _ = graded(result, grade, prices)
    return [*trace[:-1], *ending]
