"""Refine one task in this process, with no Ray: for notebooks, scripts and tests."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from redraft.actors.arbiter import Arbiter
from redraft.actors.factory import local_roles
from redraft.protocols.messages import Message, Result, Task, encode, iter_frames
from redraft.run.config import RunConfig
from redraft.run.roles import BackendOverrides, arbiter_settings, role_setup


@dataclass
class Refinement:
    """One refined task: its result and every message of its trace."""

    result: Result
    trace: list[Message]


def refine(task: Task, config: RunConfig | None = None, *, backends: BackendOverrides | None = None) -> Refinement:
    """Refine one task in this process (no Ray), e.g. from a notebook. The task's scenario checks it."""
    config = (config or RunConfig()).replace(scenario=task.scenario)
    setup = role_setup(config, backends)
    arbiter = Arbiter(local_roles(setup, config.experiment.strategy), arbiter_settings(config))
    frames = asyncio.run(arbiter.run(encode(task), config.budgets.task_timeout))
    trace = list(iter_frames(b"".join(frames)))
    result = trace[-1]
    assert isinstance(result, Result)
    return Refinement(result=result, trace=trace)
