"""Held-out grading after the loop: which candidates to grade, and the result with its grades.

The loop ends with a `Result` scored by feedback alone. Then, and only then, the
driver sends the task *with* its gold and the candidates the loop wrote to a
grader (`redraft.engine.grader`), and the task's record gets the grades of its
final answer and of round 0's leader. A task with nothing to grade against (no
gold, and a feedback that is not its grade) keeps null grades: unknown, not 0.

The trace of a graded task is the loop's messages, then the `Grade` (with the
gold it was graded against), then the graded `Result`, last as always.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from redraft.protocols.messages import (
    CandidateGrade,
    CandidateText,
    Draft,
    Grade,
    GradeRequest,
    Message,
    Result,
    Task,
    Verification,
)
from redraft.scenarios import Scenario


def grade_request(scenario: Scenario, task: Task, trace: Sequence[Message]) -> GradeRequest | None:
    """What to ask the grader about a finished task, or None when it has nothing to be graded against."""
    if not task.gold and not scenario.feedback_is_grade:
        return None
    candidates = candidates_of(trace)
    return GradeRequest(task=task, candidates=candidates) if candidates else None


def candidates_of(trace: Sequence[Message]) -> list[CandidateText]:
    """Every candidate answer of the loop: each draft the verifier judged as an answer (not a stage)."""
    latest: dict[tuple[int, int], str] = {}
    candidates: list[CandidateText] = []
    for message in trace:
        if isinstance(message, Draft):
            latest[(message.round, message.sample)] = message.text
        elif isinstance(message, Verification) and message.stage is None:
            text = latest.get((message.round, message.sample))
            if text is not None:
                candidates.append(CandidateText(round=message.round, sample=message.sample, text=text))
    return list({(c.round, c.sample): c for c in candidates}.values())  # a re-verified candidate once


def with_grades(result: Result, grade: Grade) -> Result:
    """``result`` with the grades of its final answer and of round 0's leader (null where not graded)."""
    by_candidate: dict[tuple[int | None, int | None], CandidateGrade] = {(g.round, g.sample): g for g in grade.grades}
    final = by_candidate.get((result.best_round, result.best_sample))
    initial = by_candidate.get((0, result.initial_sample))
    return msgspec.structs.replace(
        result,
        grade=final.score if final else None,
        graded_pass=final.passed if final else None,
        initial_grade=initial.score if initial else None,
        initial_graded_pass=initial.passed if initial else None,
    )


def graded(result: Result, grade: Grade) -> tuple[list[Message], Result]:
    """What a task's trace ends with once graded: the `Grade`, then the graded `Result` (in place of the
    loop's), and that result."""
    with_grade = with_grades(result, grade)
    return [grade, with_grade], with_grade
