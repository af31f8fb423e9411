"""Refine one task in this process, with no Ray: for notebooks, scripts and tests."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from redraft.actors.factory import local_graders, local_roles
from redraft.config import RunConfig
from redraft.engine.arbiter import Arbiter
from redraft.engine.grader import Grader
from redraft.engine.grading import grade_request, graded_frames
from redraft.engine.setup import BackendOverrides, arbiter_settings, role_setup
from redraft.protocols.messages import Message, Result, Task, encode, iter_frames
from redraft.scenarios import get_scenario


@dataclass
class Refinement:
    """One refined task: its result and every message of its trace."""

    result: Result
    trace: list[Message]


def refine(task: Task, config: RunConfig | None = None, *, backends: BackendOverrides | None = None) -> Refinement:
    """Refine one task in this process (no Ray), e.g. from a notebook: the task's scenario gives the feedback,
    and its gold, if it has any, the held-out grade after the loop."""
    config = (config or RunConfig()).replace(scenario=task.scenario)
    setup = role_setup(config, backends)
    arbiter = Arbiter(local_roles(setup, config.experiment.strategy), arbiter_settings(config))
    grader = local_graders(setup).members[0]
    frames = asyncio.run(
        refine_frames(
            arbiter, grader, task, oracle=config.experiment.oracle_feedback, timeout_s=config.budgets.task_timeout
        )
    )
    trace = list(iter_frames(b"".join(frames)))
    result = trace[-1]
    assert isinstance(result, Result)
    return Refinement(result=result, trace=trace)


async def refine_frames(
    arbiter: Arbiter, grader: Grader, task: Task, *, oracle: bool = False, timeout_s: float | None = None
) -> list[bytes]:
    """One task through an in-process arbiter and grader: the loop on the task without its gold (unless
    ``oracle``), then the held-out grade; every frame of its trace, the graded `Result` last."""
    seen = task if oracle else task.without_gold()  # the loop never sees the gold
    frames = await arbiter.run(encode(seen), timeout_s)
    request = grade_request(get_scenario(task.scenario), task, frames)
    if request is None:
        return frames
    return graded_frames(frames, await grader.grade(encode(request)))[0]
