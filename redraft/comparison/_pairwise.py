"""Pairwise verdicts between arms (``redraft compare --judge MODEL --pairwise``): the judge shown two arms' final
answers to one task, in both orders.

For each pair of arms and each task both answered (their first repeat), the judge is asked which answer is
better, once in each order (`redraft.judging.Judge.compare`). A verdict that names the same answer both times is
a win; a tie in both orders, a verdict that changed with the order (a *flip*, counted apart) and a reply that
was no verdict are ties. The difference is a's share of wins less b's, decided by the exact McNemar test over
the tasks (`redraft.stats.paired`: only the decisive verdicts inform it, as only the discordant tasks inform a
pass-rate difference), so its p value and interval say as much as the wins can.

The judgments are asked here, after every lane has finished, through the response cache (a comparison run again
asks nothing it asked before); what they spent, priced by the comparison's price table as the lanes' calls are, is
the comparison's own grading cost (`Comparison.grading`), counted apart from the arms' figures, which they do not
touch: the arms stay matched on their own spend.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Sequence

from redraft.comparison._analysis import Difference, PairwiseFigures
from redraft.comparison._runner import BASELINE, ComparePlan
from redraft.engine import run_blocking
from redraft.engine.grader import JudgeSetup
from redraft.judging import JUDGE_SETTINGS, Judge, PairVerdict, priced_verdicts
from redraft.protocols.messages import Result, Task
from redraft.rundir.frames import KnownFrame
from redraft.rundir.reader import RunReader
from redraft.stats import paired

PARALLEL = 8
"""Pairwise judgments asked at once."""


Answers = dict[str, tuple[Task, str]]
"""An arm's final answer to each task it answered, by task id, with the task (as the loop saw it)."""


def pairwise(plan: ComparePlan, judge: JudgeSetup, *, parallel: int = PARALLEL) -> list[PairwiseFigures]:
    """Every pair of ``plan``'s arms judged against each other by ``judge`` (see the module docstring)."""
    settings = dataclasses.replace(JUDGE_SETTINGS, cache=plan.base.runtime.cache)
    asker = Judge(judge.backend, None, settings)
    answers = {lane.arm: _answers(RunReader(plan.out / lane.label)) for lane in plan.lanes() if lane.repeat == 0}
    arms = [name for name in answers if name != BASELINE]
    prices = plan.base.runtime.prices
    pairs = [(a, b) for a, b in itertools.combinations(arms, 2)]
    return run_blocking(_all(asker, pairs, answers, parallel, prices))


async def _all(
    judge: Judge, pairs: Sequence[tuple[str, str]], answers: dict[str, Answers], parallel: int, prices: str | None
) -> list[PairwiseFigures]:
    limit = asyncio.Semaphore(parallel)

    async def one(task: Task, a: str, b: str) -> PairVerdict:
        async with limit:
            return await judge.compare(task, a, b)

    figures = []
    for a, b in pairs:
        shared = [t for t in answers[a] if t in answers[b]]
        verdicts = await asyncio.gather(*(one(answers[a][t][0], answers[a][t][1], answers[b][t][1]) for t in shared))
        figures.append(_figures(a, b, list(verdicts), prices))
    return figures


def _figures(a: str, b: str, verdicts: list[PairVerdict], prices: str | None) -> PairwiseFigures:
    usage, unpriced = priced_verdicts(verdicts, prices)
    ours = [float(v.winner == "a") for v in verdicts]
    theirs = [float(v.winner == "b") for v in verdicts]
    return PairwiseFigures(
        a=a,
        b=b,
        pairs=len(verdicts),
        a_wins=int(sum(ours)),
        b_wins=int(sum(theirs)),
        ties=sum(v.winner == "tie" for v in verdicts),
        flips=sum(v.flipped for v in verdicts),
        invalid=sum(None in v.orders for v in verdicts),
        difference=Difference.of(a, b, paired(ours, theirs)),
        usage=usage,
        unpriced=unpriced,
    )


def _answers(run: RunReader) -> Answers:
    found: Answers = {}
    for entry, frames in run.tasks():
        result: Result = entry.result
        task = next((f.message for f in frames if isinstance(f, KnownFrame) and isinstance(f.message, Task)), None)
        if task is not None and result.text and result.error is None:
            found[result.task_id] = (task, result.text)
    return found
