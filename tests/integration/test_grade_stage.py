"""The dispatch's grade stage on a real Ray: a grader that dies under a task's grade is asked again on another,
and a task whose every grader died is written graded as failed, with why: never lost, never out of the graded
rate, and its loop's result (not an error) stands."""

from __future__ import annotations

import os
from typing import Any

import msgspec
import pytest

from redraft.actors._attempts import Pending, TaskAttempts, error_result
from redraft.actors._clock import RunClock
from redraft.actors._grading import GRADE_TRIES, GradeStage
from redraft.protocols.messages import CandidateText, Grade, GradeRequest, Result, Task, decode_as, encode

TASK = Task(task_id="apples", scenario="arithmetic", prompt="7 + 5?", gold={"answer": 12})


class Graders:
    """The fleet as the grade stage sees it: its graders, and how a grade request frame is sent to one."""

    def __init__(self, graders: list[Any]) -> None:
        self.graders = graders

    def ask_grader(self, grader: Any, frame: bytes) -> Any:
        return grader.serve.remote(frame)


def grader_actors(dying: list[bool]) -> list[Any]:
    import ray

    @ray.remote(num_cpus=0, max_restarts=0)
    class StubGrader:
        def __init__(self, dies: bool) -> None:
            self.dies = dies

        def serve(self, frame: bytes) -> bytes:
            if self.dies:
                os._exit(1)  # the grader's process dies under the call
            request = decode_as(frame, GradeRequest)
            return encode(Grade(task_id=request.task.task_id, gold={"answer": 12}))

    return [StubGrader.remote(dies) for dies in dying]  # type: ignore[attr-defined]


def graded_through(graders: list[Any]) -> tuple[list[Result], list[Grade], int]:
    """Grade one finished task through ``graders``; what was written, the grades in its frames, the tries."""
    import ray

    written: list[tuple[list[bytes], Result]] = []
    in_flight: dict[Any, Pending] = {}
    stage = GradeStage(Graders(graders), RunClock(started=0.0), in_flight, lambda f, r: written.append((f, r)))  # type: ignore[arg-type]
    finished = msgspec.structs.replace(error_result(TASK, "", ""), error=None, error_type=None, stop_reason="threshold")
    pending = Pending(TASK, 0, None, deadline=1e9, attempts=TaskAttempts(), frames=[encode(TASK), encode(finished)])
    pending.grading = GradeRequest(task=TASK, candidates=[CandidateText(round=0, sample=0, text="Answer: 12")])
    stage.send(pending)
    while in_flight:
        [ready], _ = ray.wait(list(in_flight), num_returns=1, timeout=120)
        stage.land(ready, in_flight.pop(ready))
    [(frames, result)] = written
    grades = [decode_as(f, Grade) for f in frames[1:-1]]  # the task, its grade, the graded result
    return [result], grades, pending.grade_tries


@pytest.mark.usefixtures("ray_cluster")
def test_a_grader_that_dies_is_replaced_by_another_and_the_task_is_graded() -> None:
    results, grades, tries = graded_through(grader_actors([True, False]))
    assert tries == 2  # the first grader died, the second answered
    assert [g.error for g in grades] == [None] and grades[0].gold == {"answer": 12}
    assert results[0].error is None and results[0].stop_reason == "threshold"


@pytest.mark.usefixtures("ray_cluster")
def test_a_task_whose_every_grader_died_is_written_graded_as_failed_with_why() -> None:
    results, grades, tries = graded_through(grader_actors([True] * GRADE_TRIES))
    assert tries == GRADE_TRIES
    assert len(grades) == 1 and grades[0].error is not None and grades[0].error_type is not None
    assert [g.passed for g in grades[0].grades] == [False]  # in the graded rate, never silently out of it
    assert results[0].graded_pass is False and results[0].grade_error == grades[0].error_type
    assert results[0].error is None and results[0].stop_reason == "threshold"  # the loop's result stands
