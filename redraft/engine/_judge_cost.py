"""What a run's judge (``--judge``) is estimated to spend on a task, from the task's simulated result.

The judge grades a task's final answer and round 0's leader (one answer when they are the same), or every sample
of a run of one round (`redraft.engine.grader.grade_request`), each ``--judge-repeats`` times. A judgment's
prompt is the judge's own words and rubric (`JudgeSetup.prompt_chars`), the task and the answer, counted at about
four characters a token, the answer filling as much of ``--max-tokens`` as the simulated course says; its reply
fills as much of the judge's token limit. Priced by the run's price table, as the loop's calls are, at the batch
price when its calls go through its provider's batch API (``--batch``).
"""

from __future__ import annotations

import math

from redraft.backends import batchable
from redraft.backends.pricing import PriceTable
from redraft.engine._costing import Course
from redraft.engine.grader import JudgeSetup
from redraft.engine.resolution import ResolvedRun, model_of
from redraft.protocols.messages import Result, Task, Usage

CHARS_PER_TOKEN = 4


def judge_usage(
    judge: JudgeSetup,
    task: Task,
    result: Result,
    course: Course,
    prices: PriceTable,
    *,
    draft_tokens: int,
    samples: int | None,
    batch: bool = False,
) -> Usage:
    """The judge's calls on ``task`` whose simulated loop ended in ``result``, priced (``samples``: in a run of one
    round, every sample is judged, and there are this many; ``batch``: its calls go through a batch API)."""
    if result.best_round is None:
        answers = 0  # the task ended without a candidate: nothing to grade
    elif samples is not None:
        answers = samples
    else:
        answers = 1 if (result.best_round, result.best_sample) == (0, result.initial_sample) else 2
    calls = answers * judge.repeats
    prompt = judge.prompt_chars + len(task.prompt) + draft_tokens * CHARS_PER_TOKEN * course.fill
    usage = Usage(
        input_tokens=calls * math.ceil(prompt / CHARS_PER_TOKEN),
        output_tokens=calls * math.ceil(judge.max_tokens * course.fill),
        calls=calls,
        batch_calls=calls if batch else 0,
    )
    return prices.priced(model_of(judge.backend), usage)


def judged(run: ResolvedRun, task: Task, result: Result, course: Course) -> dict[str, Usage]:
    """What ``run``'s judge spends on ``task`` after a simulated course, by role (``judge``), or nothing without one."""
    judge, e = run.setup.judge, run.experiment
    if judge is None:
        return {}
    samples = e.samples if e.max_rounds == 1 else None
    batch = _batched(run)
    usage = judge_usage(
        judge, task, result, course, run.settings.prices, draft_tokens=e.max_tokens, samples=samples, batch=batch
    )
    return {"judge": usage}


def judge_models(run: ResolvedRun) -> dict[str, str]:
    """The judge's model by role (``judge``), for the estimate's table and its prices; nothing without one."""
    return {} if run.setup.judge is None else {"judge": model_of(run.setup.judge.backend)}


def judge_assumption(run: ResolvedRun) -> tuple[str, ...]:
    """How the judge's calls were estimated, in one sentence (none without a judge)."""
    if run.setup.judge is None:
        return ()
    return (
        f"judge: {run.setup.judge.repeats} call(s) per graded answer after the loop (a task's final answer and round "
        "0's leader, or every sample of a run of one round), each its words, rubric, task and answer, and a reply "
        "filling its token limit as the answers do" + (", at the batch price (--batch)" if _batched(run) else ""),
    )


def _batched(run: ResolvedRun) -> bool:
    """The run's judge sends its calls through its provider's batch API (``--batch``, a model that has one)."""
    return run.setup.judge is not None and run.runtime.batch and batchable(run.setup.judge.backend) is not None
