"""The grader: scores a finished task's candidates against its held-out gold. Never part of the loop.

The driver calls it after a task's loop has ended (`redraft.engine.grading`), with
the task *including* its gold and the candidates the loop wrote. No role of the
loop calls it, and nothing it returns goes back into a loop: a grade scores what
refinement produced, it never steers it. Grades run in worker threads (a grade
may execute code in the sandbox), at most one per CPU at once, like checks.
A scenario whose grade is instant (`Scenario.check_cost`) has no grader actors: the
driver grades its tasks itself, on its own thread (`Grader.grade_here`).

A grade function that raises does not fail the task: its `Grade` carries the
``error`` and no grades, so the task's grades are missing (null), not 0.
"""

from __future__ import annotations

import asyncio

from redraft.engine._workers import Workers
from redraft.engine.pools import Reply, Request
from redraft.errors import ProtocolError, describe
from redraft.protocols.messages import CandidateGrade, CandidateText, CheckResult, Grade, GradeRequest, Task
from redraft.scenarios import Scenario, get_scenario


class Grader:
    """`GradeRequest` in, `Grade` out; one scenario per grader."""

    def __init__(self, scenario: str, *, parallel: int | None = None) -> None:
        self._scenario = get_scenario(scenario)  # the name resolved once, here: a grader actor is sent names
        self._workers = Workers(parallel, name="redraft-grader")

    @property
    def scenario(self) -> Scenario:
        return self._scenario

    async def serve(self, request: Request) -> Reply:
        if isinstance(request, GradeRequest):
            return await self.grade(request)
        raise ProtocolError(f"the grader does not serve `{type(request).__name__}` requests")

    async def grade(self, request: GradeRequest) -> Grade:
        texts = _distinct_texts(request)
        try:
            verdicts = await asyncio.gather(*(self._grade_one(request.task, text) for text in texts))
        except Exception as exc:
            return _missing(request, exc)
        return _reply(request, dict(zip(texts, verdicts, strict=True)))

    def grade_here(self, request: GradeRequest) -> Grade:
        """`grade` on the caller's thread, for a scenario whose grade is instant (`Scenario.check_cost`): the
        driver grades such tasks itself rather than send them to a grader actor."""
        texts = _distinct_texts(request)
        try:
            verdicts = [_clamped(self._scenario.grade(request.task, text)) for text in texts]
        except Exception as exc:
            return _missing(request, exc)
        return _reply(request, dict(zip(texts, verdicts, strict=True)))

    async def _grade_one(self, task: Task, text: str) -> Verdict | None:
        return _clamped(await self._workers.run(self._scenario.grade, task, text))


Verdict = tuple[float, bool, str]
"""A candidate's grade: score (clamped to [0, 1]), passed, detail."""


def _distinct_texts(request: GradeRequest) -> list[str]:
    return list(dict.fromkeys(c.text for c in request.candidates))  # each distinct text graded once


def _clamped(verdict: CheckResult | None) -> Verdict | None:
    if verdict is None:
        return None
    return min(max(verdict.score, 0.0), 1.0), verdict.passed, verdict.detail


def _reply(request: GradeRequest, by_text: dict[str, Verdict | None]) -> Grade:
    task = request.task
    grades = [_graded(c, by_text[c.text]) for c in request.candidates if by_text[c.text] is not None]
    return Grade(task_id=task.task_id, gold=task.gold, grades=grades)


def _missing(request: GradeRequest, exc: BaseException) -> Grade:
    """The reply when grading itself broke: no evidence about the candidates, so their grades are missing."""
    return Grade(task_id=request.task.task_id, gold=request.task.gold, error=describe(exc))


def _graded(candidate: CandidateText, verdict: Verdict | None) -> CandidateGrade:
    assert verdict is not None
    score, passed, detail = verdict
    return CandidateGrade(round=candidate.round, sample=candidate.sample, score=score, passed=passed, detail=detail)
