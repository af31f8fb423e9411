"""The grader: scores a finished task's candidates against its held-out gold. Never part of the loop.

The driver calls it after a task's loop has ended (`redraft.engine.grading`), with
the task *including* its gold and the candidates the loop wrote. No role of the
loop calls it, and nothing it returns goes back into a loop: a grade scores what
refinement produced, it never steers it. Grades run in worker threads (a grade
may execute code in the sandbox), at most one per CPU at once, like checks.
A scenario whose grade is cheap (`Scenario.cheap_check`) has no grader actors: the
driver grades its tasks itself, on its own thread (`Grader.grade_here`).

A grade function that raises does not fail the task: its `Grade` carries the
``error`` and no grades, so the task's grades are missing (null), not 0.
"""

from __future__ import annotations

import asyncio

from redraft.engine.workers import Workers
from redraft.errors import describe
from redraft.protocols.messages import (
    CandidateGrade,
    CandidateText,
    CheckResult,
    Grade,
    GradeRequest,
    Task,
    decode_as,
    encode,
)
from redraft.runtime import die_with_raylet
from redraft.scenarios import get_scenario
from redraft.scenarios.base import grade_of


class Grader:
    """Bytes in (`GradeRequest`), bytes out (`Grade`); one scenario per grader."""

    def __init__(self, scenario: str, *, parallel: int | None = None) -> None:
        die_with_raylet()  # a driver-owned Ray whose driver died: stop, do not run paid calls on
        self._scenario = get_scenario(scenario)
        self._workers = Workers(parallel, name="redraft-grader")

    async def grade(self, payload: bytes) -> bytes:
        request = decode_as(payload, GradeRequest)
        texts = _distinct_texts(request)
        try:
            verdicts = await asyncio.gather(*(self._grade_one(request.task, text) for text in texts))
        except Exception as exc:
            return _missing(request, exc)
        return _reply(request, dict(zip(texts, verdicts, strict=True)))

    def grade_here(self, payload: bytes) -> bytes:
        """`grade` on the caller's thread, for a scenario whose grade is cheap (`Scenario.cheap_check`): the
        driver grades such tasks itself rather than send them to a grader actor."""
        request = decode_as(payload, GradeRequest)
        texts = _distinct_texts(request)
        try:
            verdicts = [_clamped(grade_of(self._scenario, request.task, text)) for text in texts]
        except Exception as exc:
            return _missing(request, exc)
        return _reply(request, dict(zip(texts, verdicts, strict=True)))

    async def _grade_one(self, task: Task, text: str) -> Verdict | None:
        return _clamped(await self._workers.run(grade_of, self._scenario, task, text))


Verdict = tuple[float, bool, str]
"""A candidate's grade: score (clamped to [0, 1]), passed, detail."""


def _distinct_texts(request: GradeRequest) -> list[str]:
    return list(dict.fromkeys(c.text for c in request.candidates))  # each distinct text graded once


def _clamped(verdict: CheckResult | None) -> Verdict | None:
    if verdict is None:
        return None
    return min(max(verdict.score, 0.0), 1.0), verdict.passed, verdict.detail


def _reply(request: GradeRequest, by_text: dict[str, Verdict | None]) -> bytes:
    task = request.task
    grades = [_graded(c, by_text[c.text]) for c in request.candidates if by_text[c.text] is not None]
    return encode(Grade(task_id=task.task_id, gold=task.gold, grades=grades))


def _missing(request: GradeRequest, exc: BaseException) -> bytes:
    """The reply when grading itself broke: no evidence about the candidates, so their grades are missing."""
    return encode(Grade(task_id=request.task.task_id, gold=request.task.gold, error=describe(exc)))


def _graded(candidate: CandidateText, verdict: Verdict | None) -> CandidateGrade:
    assert verdict is not None
    score, passed, detail = verdict
    return CandidateGrade(round=candidate.round, sample=candidate.sample, score=score, passed=passed, detail=detail)
