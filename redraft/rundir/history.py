"""One task's evolution, rebuilt from its trace frames: rounds, candidates, checks, critiques, decisions.

Built from typed frames (`redraft.rundir.frames`), never raising on one. A
candidate is a `Draft`; the `Verification` and `Critique` frames of the same
round and sample (and stage, when the frame names one) attach to it, several
critiques per candidate (two critics) all kept. Requests are kept per round.
Frames with no slot of their own (a `Reflection`, a kind this version does not
know, a frame that did not validate as its kind) are kept too: beside their
candidate (`DraftEntry.others`) when they name a round and a sample, else in
their round (`Round.others`), else in `TaskHistory.others`. The "best so far"
after each round is the candidate the round's `Decision` names.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from redraft.protocols.messages import (
    CandidateGrade,
    Critique,
    CritiqueRequest,
    Decision,
    Draft,
    DraftRequest,
    Grade,
    GradeRequest,
    Message,
    PlanVersion,
    Reflection,
    ReflectRequest,
    Result,
    Task,
    Verification,
    VerifyRequest,
)
from redraft.rundir.frames import Frame, GenericFrame, KnownFrame


@dataclass
class DraftEntry:
    """One draft and what was said about it."""

    draft: KnownFrame[Draft]
    verification: KnownFrame[Verification] | None = None
    critiques: list[KnownFrame[Critique]] = field(default_factory=list)
    others: list[Frame] = field(default_factory=list)
    """Other frames about this candidate: a reflection on it, or kinds this version does not know."""
    grade: CandidateGrade | None = None
    """Its held-out grade, from the task's `Grade` frame (None: not graded)."""

    @property
    def sample(self) -> int:
        return self.draft.message.sample

    @property
    def stage(self) -> str | None:
        return self.draft.message.stage

    @property
    def text(self) -> str:
        return self.draft.message.text

    @property
    def score(self) -> float | None:
        return None if self.verification is None else self.verification.message.score

    @property
    def passed(self) -> bool | None:
        return None if self.verification is None else self.verification.message.passed


@dataclass
class Round:
    number: int
    candidates: list[DraftEntry] = field(default_factory=list)
    decision: KnownFrame[Decision] | None = None
    requests: list[Frame] = field(default_factory=list)
    """What the arbiter asked the roles (every ``*_request`` kind): seeds, the revision, stages, modes."""
    others: list[Frame] = field(default_factory=list)
    """Frames of this round with no slot of their own and no candidate, in trace order."""

    def candidate(self, sample: int) -> DraftEntry | None:
        """The last candidate of ``sample`` in this round (with stages: the latest stage)."""
        found = [c for c in self.candidates if c.sample == sample]
        return found[-1] if found else None

    def target(self, sample: Any, stage: Any = None) -> DraftEntry | None:
        """The candidate a frame about ``sample`` (and ``stage``, if given) is about."""
        for candidate in reversed(self.candidates):
            if candidate.sample == sample and (stage is None or candidate.stage == stage):
                return candidate
        return None


@dataclass
class BestStep:
    """The best-so-far candidate after one round, and how it differs from the one before."""

    round: int
    text: str
    score: float
    changed: bool
    diff: list[str]
    """Unified diff lines from the previous best (empty on round 0 or when unchanged)."""


@dataclass(frozen=True)
class PlanChange:
    """One version of a task's plan: the frame, its steps as lines, and the diff from the version before."""

    plan: PlanVersion
    lines: list[str]
    diff: list[str]


@dataclass
class TaskHistory:
    task_id: str
    task: KnownFrame[Task] | None = None
    result: KnownFrame[Result] | None = None
    rounds: list[Round] = field(default_factory=list)
    others: list[Frame] = field(default_factory=list)
    """Frames outside any round (kinds this version does not know, without a ``round``)."""
    grade: KnownFrame[Grade] | None = None
    """The held-out grade of the task's candidates, and the gold it was graded against (None: not graded)."""
    plans: list[KnownFrame[PlanVersion]] = field(default_factory=list)
    """Every version of the task's plan, in order (``plan_execute``)."""

    def plan_changes(self) -> list[PlanChange]:
        """Each version of the plan, as lines, with its diff from the version before (none for the first)."""
        changes: list[PlanChange] = []
        before: str | None = None
        for frame in self.plans:
            plan = frame.message
            lines = [f"{s.number}. {s.summary()}" for s in plan.steps]
            text = "\n".join(lines)
            changes.append(PlanChange(plan, lines, text_diff(before, text, "the plan before", f"plan v{plan.version}")))
            before = text
        return changes

    def best_steps(self) -> list[BestStep]:
        """The best candidate after each decided round, with a diff whenever it changed."""
        steps: list[BestStep] = []
        previous: str | None = None
        for rnd in self.rounds:
            best = self.best_of(rnd.decision.message) if rnd.decision else None
            if rnd.decision is None or best is None:
                continue
            changed = previous is not None and best.text != previous
            diff = text_diff(
                previous, best.text, f"best after round {rnd.number - 1}", f"best after round {rnd.number}"
            )
            steps.append(BestStep(rnd.number, best.text, rnd.decision.message.best_score, changed, diff))
            previous = best.text
        return steps

    def best_of(self, decision: Decision) -> DraftEntry | None:
        """The candidate a decision names as the best so far."""
        if decision.best_round is None or decision.best_sample is None:
            return None
        rnd = next((r for r in self.rounds if r.number == decision.best_round), None)
        return rnd.candidate(decision.best_sample) if rnd else None

    def graded_by_round(self) -> list[bool | None]:
        """Whether the best so far passes the held-out grade, after each decided round (None: not graded)."""
        states: list[bool | None] = []
        for rnd in self.rounds:
            best = self.best_of(rnd.decision.message) if rnd.decision else None
            if rnd.decision is not None:
                states.append(best.grade.passed if best is not None and best.grade is not None else None)
        return states

    def passed_by_round(self, threshold: float = 1.0) -> list[bool]:
        """Whether the best so far passes, after each round that was decided."""
        states: list[bool] = []
        for rnd in self.rounds:
            if rnd.decision is None:
                continue
            best = self.best_of(rnd.decision.message)
            if best is not None and best.passed is not None:
                states.append(best.passed)
            else:  # no verification of the best on record: fall back on the score
                states.append(rnd.decision.message.best_score >= threshold)
        return states


def text_diff(before: str | None, after: str, before_name: str, after_name: str) -> list[str]:
    if before is None or before == after:
        return []
    return list(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), fromfile=before_name, tofile=after_name, lineterm="", n=2
        )
    )


def build_history(task_id: str, frames: Iterable[Frame]) -> TaskHistory:
    """Group one task's frames by round; never raises on unknown kinds or fields."""
    history = TaskHistory(task_id=task_id)
    rounds: dict[int, Round] = {}
    for frame in frames:
        if isinstance(frame, KnownFrame):
            _place_known(history, rounds, frame)
        else:
            _place_generic(history, rounds, frame)
    history.rounds = [rounds[n] for n in sorted(rounds)]
    if history.grade is not None:
        for grade in history.grade.message.grades:
            rnd = rounds.get(grade.round)
            candidate = rnd.candidate(grade.sample) if rnd is not None else None  # the last stage: the answer
            if candidate is not None:
                candidate.grade = grade
    return history


def _place_known(history: TaskHistory, rounds: dict[int, Round], frame: KnownFrame[Message]) -> None:
    """Put a typed frame in its slot: the task, the result, a round's candidates, requests or decision."""
    m = frame.message
    match m:
        case DraftRequest():
            _round(rounds, m.round).requests.append(frame)
        case VerifyRequest() | CritiqueRequest() | ReflectRequest():
            _round(rounds, m.draft.round).requests.append(frame)  # requests carry the round in their draft
        case Draft():
            _round(rounds, m.round).candidates.append(DraftEntry(draft=cast(KnownFrame[Draft], frame)))
        case Verification():
            rnd = _round(rounds, m.round)
            target = rnd.target(m.sample, m.stage)
            if target is None:
                rnd.others.append(frame)
            else:
                target.verification = cast(KnownFrame[Verification], frame)
        case Critique():
            rnd = _round(rounds, m.round)
            target = rnd.target(m.sample)
            if target is None:
                rnd.others.append(frame)
            else:
                target.critiques.append(cast(KnownFrame[Critique], frame))
        case Decision():
            _round(rounds, m.round).decision = cast(KnownFrame[Decision], frame)
        case Reflection():  # no slot of its own: beside the candidate it is about
            rnd = _round(rounds, m.round)
            target = rnd.target(m.sample)
            (target.others if target is not None else rnd.others).append(frame)
        case Task():
            history.task = cast(KnownFrame[Task], frame)
        case Result():
            history.result = cast(KnownFrame[Result], frame)
        case Grade():
            history.grade = cast(KnownFrame[Grade], frame)
        case PlanVersion():
            history.plans.append(cast(KnownFrame[PlanVersion], frame))
        case GradeRequest():
            history.others.append(frame)


def _place_generic(history: TaskHistory, rounds: dict[int, Round], frame: GenericFrame) -> None:
    """Keep a frame of unknown meaning: in its round (beside its candidate if it names one), else outside."""
    fields = frame.fields
    number = fields.get("round")
    draft = fields.get("draft")
    if not isinstance(number, int) and isinstance(draft, dict):
        number = draft.get("round")  # requests carry the round inside their draft
    if not isinstance(number, int):
        history.others.append(frame)
        return
    rnd = _round(rounds, number)
    if frame.kind.endswith("_request"):
        rnd.requests.append(frame)
        return
    target = rnd.target(fields["sample"], fields.get("stage")) if "sample" in fields else None
    (target.others if target is not None else rnd.others).append(frame)


def _round(rounds: dict[int, Round], number: int) -> Round:
    rnd = rounds.get(number)
    if rnd is None:
        rnd = rounds[number] = Round(number)
    return rnd
