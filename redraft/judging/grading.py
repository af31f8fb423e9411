"""The judge as a run's grader (``--judge MODEL``): a finished task's answers graded by a rubric, after the loop.

`JudgeGrader` is the grader role of a run with a judge: `GradeRequest` in, `Grade` out, like the scenario's
`redraft.engine.grader.Grader`, and sent nothing else. It is asked only after a task's loop has finished, and
what it returns goes to the run directory alone: nothing it writes reaches a drafter, critic, verifier or
arbiter (the held-out rule, as for gold). Each distinct answer is judged ``repeats`` times, with seeds 0, 1, ...
(each its own call, so the response cache answers a repeat only when the same judgment was asked before); its
score is the mean of the valid judgments and it passes at the rubric's threshold (each judgment's score and
pass are kept beside it). A judge whose replies are all invalid, whose backend fails, or that does not answer
within ``deadline_s`` leaves the answer ungraded with the reason in ``Grade.error``: the task is written with
its grade missing (unknown, not 0), never lost.

`judge_setup` is registered as the ``judge`` grader of the ``redraft.graders`` entry-point group: the engine
resolves a run's ``--judge``, ``--rubric`` and ``--judge-repeats`` through it, in the caller's process, before
anything starts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math

from redraft.backends import BackendSpec
from redraft.engine.grader import GRADERS, JudgeAsk, JudgeSetup
from redraft.engine.pools import Reply, Request
from redraft.engine.prompts import Prompts
from redraft.errors import ProtocolError, UserError, describe, error_type
from redraft.judging.judge import JUDGE_SETTINGS, Judge, Judgment, judge_prompts, rubric_text
from redraft.judging.rubric import Rubric, read_rubric, scenario_rubric
from redraft.protocols.messages import CandidateGrade, Grade, GradeRequest, Task, Usage

JUDGE_DEADLINE_S = 540.0
"""A task's judgments come back by then, or its answers are left ungraded (the backends' own retries come first):
inside the grade stage's watchdog (`redraft.actors._grading.GRADE_WATCHDOG_S`, 600 s), so a slow judge answers
with its reason rather than be asked again elsewhere."""


class JudgeGrader:
    """`GradeRequest` in, `Grade` out, by a judge model and a rubric (see the module docstring)."""

    def __init__(
        self,
        backend: BackendSpec,
        rubric: Rubric,
        repeats: int = 1,
        *,
        cache: bool = True,
        payer: str = "",
        prompts: Prompts | None = None,
        deadline_s: float | None = JUDGE_DEADLINE_S,
    ) -> None:
        settings = dataclasses.replace(JUDGE_SETTINGS, cache=cache, payer=payer, prompts=prompts)
        self._judge = Judge(backend, rubric, settings)
        self._rubric = rubric
        self._repeats = repeats
        self._deadline_s = deadline_s

    async def serve(self, request: Request) -> Reply:
        if isinstance(request, GradeRequest):
            return await self.grade(request)
        raise ProtocolError(f"the judge does not serve `{type(request).__name__}` requests")

    async def grade(self, request: GradeRequest) -> Grade:
        task = request.task
        texts = list(dict.fromkeys(c.text for c in request.candidates))  # each distinct text judged once
        try:
            judged = await asyncio.wait_for(
                asyncio.gather(*(self._judged(task, text) for text in texts)), self._deadline_s
            )
        except TimeoutError:
            late = f"the judge did not answer within {self._deadline_s:g} s"
            return Grade(task_id=task.task_id, error=late, error_type="hung")
        except Exception as exc:  # the backend failed for good (its retries spent): the grades are missing
            return Grade(task_id=task.task_id, error=f"the judge failed: {describe(exc)}", error_type=error_type(exc))
        by_text = dict(zip(texts, judged, strict=True))
        grades, errors, usage, model = [], [], Usage(), ""
        for candidate in request.candidates:
            judgments = by_text[candidate.text]
            valid = [j for j in judgments if j.score is not None]
            errors += [j.error for j in judgments if j.error]
            if valid:
                grades.append(self._candidate(candidate.round, candidate.sample, valid))
        for judgments in judged:
            usage = sum((j.usage for j in judgments), usage)
            model = model or next((j.model for j in judgments if j.model), "")
        error = f"the judge answered no valid grade: {errors[0]}" if errors and not grades else None
        cause = "ModelError" if error else None  # its judgments were all invalid: the judge misbehaved
        return Grade(
            task_id=task.task_id, grades=grades, error=error, error_type=cause, judge=model or None, usage=usage
        )

    async def _judged(self, task: Task, text: str) -> list[Judgment]:
        return list(await asyncio.gather(*(self._judge.grade(task, text, seed=seed) for seed in range(self._repeats))))

    def _candidate(self, round_: int, sample: int, judgments: list[Judgment]) -> CandidateGrade:
        scores = [j.score for j in judgments if j.score is not None]
        score = math.fsum(scores) / len(scores)
        reasons = "; ".join(f"{c.criterion}: {c.level} ({c.reason})" for c in judgments[0].criteria)
        return CandidateGrade(
            round=round_,
            sample=sample,
            score=score,
            passed=self._rubric.passes(score),
            detail=reasons[:500],
            scores=scores if len(judgments) > 1 else [],
            passes=[bool(j.passed) for j in judgments] if len(judgments) > 1 else [],
        )


@GRADERS.register("judge")
def judge_setup(ask: JudgeAsk) -> JudgeSetup:
    """The run's judge from what it asked, by its rubric file or else the scenario's own (`scenario_rubric`);
    `UserError` for a rubric that cannot be read, or none at all."""
    rubric, digest = read_rubric(ask.rubric) if ask.rubric is not None else (scenario_rubric(ask.scenario), None)
    if rubric is None:
        raise UserError(
            f"--judge grades by a rubric and scenario {ask.scenario.name!r} has none of its own: give --rubric FILE "
            "(or --grade rubric:FILE)"
        )
    templates = judge_prompts()
    words = templates.render("judge_rubric_system") + templates.render(
        "judge_rubric_user", task="", rubric=rubric_text(rubric), candidate=""
    )
    return JudgeSetup(
        spec=ask.backend.spec,
        rubric=rubric.name,
        rubric_file={"path": ask.rubric, "sha256": digest} if ask.rubric is not None and digest else None,
        repeats=ask.repeats,
        backend=ask.backend,
        grader=JudgeGrader,
        args=(rubric, ask.repeats),
        templates=templates,
        prompt_chars=len(words),
        max_tokens=JUDGE_SETTINGS.max_tokens,
    )
