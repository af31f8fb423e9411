"""What the proposer may learn from: train tasks as the loop saw them, read from an evaluation's run.

Only the loop's own frames are read: a task's final candidate and feedback score (from its `Result`'s
``text`` and ``score``, never its grade fields), the feedback checks of that candidate (`Verification`)
and the critics' issues with it (`Critique`). The `GradeRequest` and `Grade` frames that follow the loop
in a trace hold the gold; they are never opened here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from redraft.engine.prompts import cut
from redraft.protocols.messages import Critique, Result, Verification
from redraft.protocols.tuning import Example, Failure
from redraft.rundir.frames import KnownFrame
from redraft.rundir.reader import RunReader

PROMPT_CHARS = 1_500
ANSWER_CHARS = 1_200
DETAIL_CHARS = 300
MAX_FAILURES = 6
MAX_ISSUES = 4


def examples_of(run_dir: Path, prompts: Mapping[str, str], limit: int) -> list[Example]:
    """Up to ``limit`` of the run's tasks as examples, the worst feedback first (ties by id).

    ``prompts`` gives each task's prompt by id: the train tasks', and only theirs (a task of another split
    in the run is a bug: `ValueError`).
    """
    found: list[Example] = []
    for entry, frames in RunReader(run_dir).tasks():
        result = entry.result
        if result.task_id not in prompts:
            raise ValueError(f"task {result.task_id!r} is not a train task: the proposer may not see it")
        if result.error is not None and not result.text:
            continue
        messages = [frame.message for frame in frames if isinstance(frame, KnownFrame)]
        found.append(_example(result, prompts[result.task_id], messages))
    found.sort(key=lambda example: (example.feedback, example.task_id))
    return found[:limit]


def _example(result: Result, prompt: str, messages: Sequence[object]) -> Example:
    place = (result.best_round, result.best_sample)
    failures: list[Failure] = []
    issues: list[str] = []
    for message in messages:
        if isinstance(message, Verification) and (message.round, message.sample) == place:
            failures = [
                Failure(check=c.name, detail=cut(c.detail, DETAIL_CHARS)) for c in message.checks if not c.passed
            ][:MAX_FAILURES]
        elif isinstance(message, Critique) and (message.round, message.sample) == place:
            issues = [f"{i.severity}: {cut(i.reason, DETAIL_CHARS)}" for i in message.issues][:MAX_ISSUES]
    return Example(
        task_id=result.task_id,
        prompt=cut(prompt, PROMPT_CHARS),
        answer=cut(result.text, ANSWER_CHARS),
        feedback=result.score,
        failures=failures,
        issues=issues,
    )
