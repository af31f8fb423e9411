"""Held-out grading after the loop: what a finished task is graded on, the grader, and the graded result.

The loop ends with a `Result` scored by feedback alone. Then, and only then, the driver sends the task
*with* its gold and the candidates the loop wrote (`grade_request`) to a `Grader`, and the task's record
gets the grades of its final answer and of round 0's leader (`graded`). No role of the loop calls the
grader, and nothing it returns goes back into a loop: a grade scores what refinement produced, it never
steers it. A task with nothing to grade against (no gold, and a feedback that is not its grade) keeps
null grades: unknown, not 0. The trace of a graded task is the loop's messages, then the `Grade` (with the
gold it was graded against), then the graded `Result`, last as always.

Every task with something to grade against stays in the graded rate: a grade that cannot be made (a grade
function that raised, a grade no frame can carry, a grader that hung or died on every try, a judge that
answered nothing valid) is a graded failure of each candidate asked about (`failed_grade`), its cause typed in
``Grade.error_type`` and the task's ``Result.grade_error``, which the run's tables count. The words a grade
returns are made plain (`redraft.plaintext`) where they enter, here, so a candidate's text cannot make its
own grade unencodable; a grade that still cannot be encoded is failed the same way, never dropped.

See docs/architecture.md, section "Grading by a judge".
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from redraft.backends.base import BackendSpec
from redraft.backends.pricing import PriceTable, default_prices
from redraft.engine._workers import Workers
from redraft.engine.pools import Reply, Request
from redraft.engine.prompts import Prompts
from redraft.errors import ProtocolError, describe, error_type
from redraft.plaintext import plain_text
from redraft.plugins import Registry
from redraft.protocols.messages import (
    CandidateGrade,
    CandidateText,
    CheckResult,
    Draft,
    Grade,
    GradeRequest,
    Message,
    Result,
    Task,
    Usage,
    Verification,
    encode,
)
from redraft.scenarios import Scenario, get_scenario


class GradeRole(Protocol):
    """What grades a finished task: the scenario's `Grader`, or a judge's (`JudgeSetup.grader`)."""

    async def serve(self, request: Request) -> Reply: ...


@dataclass(frozen=True)
class JudgeAsk:
    """What a run's judge is made from (``--judge``, ``--rubric``, ``--judge-repeats``), its names resolved."""

    backend: BackendSpec
    rubric: str | None
    """A rubric file; None: the scenario's own rubric."""
    scenario: Scenario
    repeats: int


@dataclass(frozen=True)
class JudgeSetup:
    """A run's judge, resolved: how its grader members are made, and what the run's records and tables name."""

    spec: str
    """The judge's backend spec."""
    rubric: str
    """The rubric's name."""
    repeats: int
    """Judgments asked per answer; its grade is their mean."""
    backend: BackendSpec
    """The judge's model (a comparison asks it for pairwise verdicts too)."""
    grader: type
    """The grader role's class: ``serve(GradeRequest) -> Grade``, made with ``(backend, *args, cache=, payer=,
    prompts=)``, and ``deadline_s=None`` when its calls wait for their batch (`batched`)."""
    args: tuple[Any, ...]
    """What its grader is made with after its backend: plain data, so it travels to the grader actors (the rubric,
    validated where it was read, among them)."""
    templates: Prompts
    """The judge's built-in templates: a run's prompts file may give its own entries of them (``judge_...``)."""
    self_judged: bool = False
    """The judge's model is the drafter's: allowed, and named so wherever its grades are shown."""
    prompts: dict[str, int] = field(default_factory=dict)
    """The versions of the judge's templates the run renders (what a judge's card must have measured)."""
    prompt_chars: int = 0
    """Characters of a judgment's prompt besides the task and the answer (its words and the rubric): the estimate's."""
    max_tokens: int = 0
    """The judge's reply's token limit (the estimate's worst case)."""
    rubric_file: dict[str, str] | None = None
    """The rubric file's path (as given) and SHA-256, from the read that loaded it (None: the scenario's own
    rubric): what the run's identity records of it."""
    batched: bool = False
    """Its calls go through its endpoint's provider batches (``--batch``): a judgment waits for its batch, with no
    deadline of its own (``--batch-wait`` bounds the wait), since grading is never on the loop's critical path."""

    def through_batches(self, backend: BackendSpec) -> JudgeSetup:
        """This judge with its calls sent through ``backend``, its endpoint's batch collector (`batched`)."""
        return dataclasses.replace(self, backend=backend, batched=True)


GRADERS: Registry[Callable[[JudgeAsk], JudgeSetup]] = Registry("grader", "redraft.graders")
"""Graders that are not the scenario's own, by name: ``judge`` (a model and a rubric) is redraft's."""


def grade_request(
    scenario: Scenario, task: Task, trace: Sequence[Message], *, judged: bool = False, every_sample: bool = False
) -> GradeRequest | None:
    """What to ask the grader about a finished task, or None when it has nothing to be graded against.

    ``judged``: a judge grades it, with or without gold, and only the final answer and round 0's leader (what the
    task's grades are), or with ``every_sample`` every candidate (a run of one round: a comparison's sampling
    baseline, whose curves are computed from each sample's grade)."""
    if judged:
        result = trace[-1]
        if not isinstance(result, Result):
            return None
        wanted = {(result.best_round, result.best_sample), (0, result.initial_sample)}
        chosen = [c for c in candidates_of(trace) if every_sample or (c.round, c.sample) in wanted]
        return GradeRequest(task=task, candidates=chosen) if chosen else None
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
    """``result`` with the grades of its final answer and of round 0's leader (null where not graded); when the
    grade could not be made (``grade.error``), each is a failure, and ``grade_error`` says why."""
    by_candidate: dict[tuple[int | None, int | None], CandidateGrade] = {(g.round, g.sample): g for g in grade.grades}
    final = by_candidate.get((result.best_round, result.best_sample))
    initial = by_candidate.get((0, result.initial_sample))
    if grade.error is not None:  # whatever a failed grade left out is failed too: no task leaves the graded rate
        final = final or _FAILED
        initial = initial or (_FAILED if result.initial_sample is not None else None)
    return msgspec.structs.replace(
        result,
        grade=final.score if final else None,
        graded_pass=final.passed if final else None,
        initial_grade=initial.score if initial else None,
        initial_graded_pass=initial.passed if initial else None,
        grade_error=(grade.error_type or "GradeError") if grade.error is not None else None,
    )


_FAILED = CandidateGrade(round=0, sample=0, score=0.0, passed=False)


def failed_grade(request: GradeRequest, error: str, cause: str) -> Grade:
    """The grade of a task whose grade could not be made: every candidate asked about failed, for ``error`` (in
    words) whose cause is ``cause`` (typed: the exception's class, ``hung``...)."""
    error = plain_text(error)
    grades = [
        CandidateGrade(round=c.round, sample=c.sample, score=0.0, passed=False, detail=f"not graded: {error}"[:500])
        for c in request.candidates
    ]
    task = request.task
    return Grade(task_id=task.task_id, gold=task.gold, grades=grades, error=error, error_type=cause)


def graded(result: Result, grade: Grade, prices: PriceTable | None = None) -> tuple[list[Message], Result]:
    """What a task's trace ends with once graded: the `Grade`, then the graded `Result` (in place of the
    loop's), and that result; a judge's calls priced by ``prices`` (the built-in table when None) and added to
    its usage, as the ``judge``'s."""
    with_grade = with_grades(result, grade)
    if grade.usage.calls:
        with_grade = _with_judge_usage(with_grade, grade.judge or "", grade.usage, prices or default_prices())
    return [grade, with_grade], with_grade


def _with_judge_usage(result: Result, model: str, usage: Usage, prices: PriceTable) -> Result:
    priced = prices.priced(model, usage)
    by_role = dict(result.usage_by_role)
    by_role["judge"] = by_role.get("judge", Usage()) + priced
    unpriced = result.unpriced_models if prices.known(model) else sorted({*result.unpriced_models, model})
    return msgspec.structs.replace(result, usage=result.usage + priced, usage_by_role=by_role, unpriced_models=unpriced)


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
            return _failed(request, exc)
        return _reply(request, dict(zip(texts, verdicts, strict=True)))

    def grade_here(self, request: GradeRequest) -> Grade:
        """`grade` on the caller's thread, for a scenario whose grade is instant (`Scenario.check_cost`): the
        driver grades such tasks itself rather than send them to a grader actor."""
        texts = _distinct_texts(request)
        try:
            verdicts = [_clamped(self._scenario.grade(request.task, text)) for text in texts]
        except Exception as exc:
            return _failed(request, exc)
        return _reply(request, dict(zip(texts, verdicts, strict=True)))

    async def _grade_one(self, task: Task, text: str) -> Marks | None:
        return _clamped(await self._workers.run(self._scenario.grade, task, text))


Marks = tuple[float, bool, str]
"""A candidate's grade: score (clamped to [0, 1]), passed, detail."""


def _distinct_texts(request: GradeRequest) -> list[str]:
    return list(dict.fromkeys(c.text for c in request.candidates))  # each distinct text graded once


def _clamped(verdict: CheckResult | None) -> Marks | None:
    if verdict is None:
        return None
    return min(max(verdict.score, 0.0), 1.0), verdict.passed, verdict.plain().detail


def _reply(request: GradeRequest, by_text: dict[str, Marks | None]) -> Grade:
    task = request.task
    grades = [_graded(c, by_text[c.text]) for c in request.candidates if by_text[c.text] is not None]
    grade = Grade(task_id=task.task_id, gold=task.gold, grades=grades)
    try:
        encode(grade)  # what cannot travel as a frame fails here, as the grade of its task, not lost on the way
    except ProtocolError as exc:
        return _failed(request, exc)
    return grade


def _failed(request: GradeRequest, exc: BaseException) -> Grade:
    """The reply when grading itself broke: each candidate failed, for that reason (`failed_grade`)."""
    return failed_grade(request, describe(exc), error_type(exc))


def _graded(candidate: CandidateText, verdict: Marks | None) -> CandidateGrade:
    assert verdict is not None
    score, passed, detail = verdict
    return CandidateGrade(round=candidate.round, sample=candidate.sample, score=score, passed=passed, detail=detail)
