"""Held-out grading after the loop: which candidates to grade, and the result with its grades.

The loop ends with a `Result` scored by feedback alone. Then, and only then, the
driver sends the task *with* its gold and the candidates the loop wrote to a
grader (`redraft.engine.grader`), and the task's record gets the grades of its
final answer and of round 0's leader. A task with nothing to grade against (no
gold, and a feedback that is not its grade) keeps null grades: unknown, not 0.

The trace of a graded task is the loop's frames, then the `Grade` frame (with the
gold it was graded against), then the graded `Result`, last as always.
"""

from __future__ import annotations

import msgspec

from redraft.protocols.messages import (
    CandidateText,
    Draft,
    Grade,
    GradeRequest,
    Result,
    Task,
    Verification,
    decode,
    decode_as,
    encode,
)
from redraft.scenarios import Scenario


def grade_request(scenario: Scenario, task: Task, frames: list[bytes]) -> GradeRequest | None:
    """What to ask the grader about a finished task, or None when it has nothing to be graded against."""
    if not task.gold and not getattr(scenario, "feedback_is_grade", False):  # a plugin may not subclass Scenario
        return None
    candidates = candidates_of(frames)
    return GradeRequest(task=task, candidates=candidates) if candidates else None


def candidates_of(frames: list[bytes]) -> list[CandidateText]:
    """Every candidate answer of the loop: each draft the verifier judged as an answer (not a stage)."""
    latest: dict[tuple[int, int], str] = {}
    candidates: list[CandidateText] = []
    for frame in frames:
        message = decode(frame)
        if isinstance(message, Draft):
            latest[(message.round, message.sample)] = message.text
        elif isinstance(message, Verification) and message.stage is None:
            text = latest.get((message.round, message.sample))
            if text is not None:
                candidates.append(CandidateText(round=message.round, sample=message.sample, text=text))
    return list({(c.round, c.sample): c for c in candidates}.values())  # a re-verified candidate once


def with_grades(result: Result, grade: Grade) -> Result:
    """``result`` with the grades of its final answer and of round 0's leader (null where not graded)."""
    by_candidate = {(g.round, g.sample): g for g in grade.grades}
    final = by_candidate.get((result.best_round, result.best_sample))
    initial = by_candidate.get((0, result.initial_sample))
    return msgspec.structs.replace(
        result,
        grade=final.score if final else None,
        graded_pass=final.passed if final else None,
        initial_grade=initial.score if initial else None,
        initial_graded_pass=initial.passed if initial else None,
    )


def graded_frames(frames: list[bytes], reply: bytes) -> tuple[list[bytes], Result]:
    """A task's trace with its grade: the loop's frames, the `Grade` frame, the graded `Result` last."""
    graded = with_grades(decode_as(frames[-1], Result), decode_as(reply, Grade))
    return [*frames[:-1], reply, encode(graded)], graded
