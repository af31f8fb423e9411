"""The message kinds: one frozen, keyword-only Struct per kind, each tagged by ``kind`` and versioned by ``v``.

The union of them, the codec and the evolution rules are `redraft.protocols.messages`, which re-exports
every kind; import them from there.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from redraft.protocols._plans import Observation, PlanAsk, PlanStep, StepRun
from redraft.protocols._records import (
    Attempt,
    CandidateGrade,
    CandidateText,
    ChatMessage,
    CheckResult,
    Intent,
    Issue,
    Revision,
    RevisionMode,
    StageStep,
    Stance,
    StopLimit,
    StopReason,
    Usage,
    VerificationQuestion,
)

WIRE_VERSION = 1


class _Frame(msgspec.Struct, tag_field="kind", frozen=True, kw_only=True, forbid_unknown_fields=False):
    v: int = WIRE_VERSION
    """Wire version of the writer."""


class Task(_Frame, tag="task", frozen=True, kw_only=True):
    """One unit of work: a prompt, the data its feedback checks may use, and the held-out gold of its grade."""

    task_id: str
    scenario: str
    prompt: str
    reference: dict[str, Any] = {}
    """Data the scenario's feedback checks use (a schema, the prompt's code...): what a user has at
    inference time. Never shown to models."""
    gold: dict[str, Any] = {}
    """Held-out data for the grade only (gold answers, hidden tests). The driver strips it from the
    task every role receives; only oracle-feedback runs let it into the loop."""

    def without_gold(self) -> Task:
        """This task as the loop sees it: the gold removed."""
        return msgspec.structs.replace(self, gold={}) if self.gold else self


class DraftRequest(_Frame, tag="draft_request", frozen=True, kw_only=True):
    """Arbiter → drafter: write candidate ``sample`` of ``round``."""

    task: Task
    round: int
    sample: int
    seed: int
    revision: Revision | None = None
    stage: StageStep | None = None
    """Set by the ``stepwise`` strategy: write this stage only."""
    mode: RevisionMode = "rewrite"
    """``patch``: answer a revision with minimal search/replace edits, which the drafter applies."""
    intent: Intent | None = None
    """Why the strategy asked for this draft, when it chooses its calls (``adaptive``); None otherwise."""
    plan: PlanAsk | None = None
    """Set by ``plan_execute``: write the plan, one step's program, or the decision after a step."""


class Draft(_Frame, tag="draft", frozen=True, kw_only=True):
    """Drafter → arbiter: one candidate."""

    task_id: str
    round: int
    sample: int
    text: str
    usage: Usage = Usage()
    model: str = ""
    finish_reason: str = ""
    latency_s: float = 0.0
    node_id: str = ""
    """The Ray node the drafter ran on (empty outside Ray)."""
    stage: str | None = None
    """The stage this draft is of (``stepwise``), else None."""
    edits_applied: int = 0
    """Patch revisions: how many of the model's edits applied."""
    edit_errors: list[str] = []
    """Patch revisions: why each edit that did not apply was refused (fed back on the next revision)."""
    messages: list[ChatMessage] = []
    """What the drafter's model was sent for this draft, its system prompt included."""


class VerifyRequest(_Frame, tag="verify_request", frozen=True, kw_only=True):
    """Arbiter → verifier: check one draft against the task's hard evidence."""

    task: Task
    draft: Draft
    stage: str | None = None
    """Check the output of this intermediate stage (its stage check), not the final answer."""
    questions: int = 0
    """Chain of verification: ask the verifier's model up to this many questions about the candidate."""
    step: StepRun | None = None
    """Run the draft as this plan step's program over the task's files and earlier steps' outputs."""


class Verification(_Frame, tag="verification", frozen=True, kw_only=True):
    """Verifier → arbiter: the checks of one draft."""

    task_id: str
    round: int
    sample: int
    score: float
    passed: bool
    answer: str | None = None
    """The candidate's final answer as the scenario extracts it (for agreement)."""
    checks: list[CheckResult] = []
    stage: str | None = None
    questions: list[VerificationQuestion] = []
    """Chain-of-verification questions and their independent answers (they inform, they do not score)."""
    usage: Usage = Usage()
    """Model calls made for the questions (none for deterministic checks)."""
    model: str = ""
    oracle: bool = False
    """The checks are the held-out grade, fed back as feedback (an oracle-feedback run)."""
    observation: Observation | None = None
    """A plan step's run: what it really did and produced."""


class CritiqueRequest(_Frame, tag="critique_request", frozen=True, kw_only=True):
    """Arbiter → critic: attack one draft."""

    task: Task
    draft: Draft
    stance: Stance = "adversarial"
    """Which critic instructions to use."""
    opponent: list[Issue] = []
    """Debate: the other critic's issues with the previous best, to confirm, refute or add to."""
    seed: int | None = None
    """The critic model's sampling seed, derived by the arbiter like every other seed (None: the backend's)."""


class Critique(_Frame, tag="critique", frozen=True, kw_only=True):
    """Critic → arbiter: the faults found in one draft."""

    task_id: str
    round: int
    sample: int
    issues: list[Issue] = []
    usage: Usage = Usage()
    model: str = ""
    error: str | None = None
    """Set when the critic's reply could not be used (the issues are then empty)."""
    stance: Stance | None = None
    """Which instructions the critic had (None: not said)."""
    messages: list[ChatMessage] = []
    """What the critic's model was sent for this critique, its system prompt included."""


class ReflectRequest(_Frame, tag="reflect_request", frozen=True, kw_only=True):
    """Arbiter → drafter: diagnose why ``draft`` failed, in words, for the memory of later rounds."""

    task: Task
    draft: Draft
    failed_checks: list[CheckResult] = []
    memory: list[Attempt] = []
    seed: int | None = None
    """The model's sampling seed, derived by the arbiter (None: the backend's)."""


class Reflection(_Frame, tag="reflection", frozen=True, kw_only=True):
    """Drafter → arbiter: a short self-diagnosis of a failed attempt (Reflexion)."""

    task_id: str
    round: int
    sample: int
    text: str
    usage: Usage = Usage()
    model: str = ""
    messages: list[ChatMessage] = []
    """What the drafter's model was sent for this reflection."""


class Decision(_Frame, tag="decision", frozen=True, kw_only=True):
    """Arbiter's verdict after a round: go on, or stop and why."""

    task_id: str
    round: int
    action: Literal["continue", "stop"]
    reason: StopReason | None = None
    best_round: int | None
    """The round of the best candidate so far (None: no round finished)."""
    best_sample: int | None
    best_score: float
    round_best_score: float
    rolled_back: bool = False
    """This round's best scored below the best so far, which was kept."""
    detail: str = ""
    limit: StopLimit | None = None
    """With reason ``budget``: which limit stopped the task (the detail says how much was spent)."""
    round_best_sample: int | None = None
    """The sample of this round's best candidate, the one a revision produced (None: none)."""


class Result(_Frame, tag="result", frozen=True, kw_only=True):
    """The outcome of one task: the best candidate over all rounds."""

    task_id: str
    scenario: str
    answer: str | None
    text: str
    score: float
    passed: bool
    initial_score: float
    initial_passed: bool
    rounds: int
    stop_reason: StopReason
    usage: Usage
    wall_s: float
    error: str | None = None
    usage_by_role: dict[str, Usage] = {}
    """The same usage split by role, keyed by `RoleName`. Keys are read as any string, so a record from a
    newer writer with a role this version does not know still reads (the views show it by name)."""
    unpriced_models: list[str] = []
    """Models the price table does not know; their calls are counted at 0 USD."""
    error_type: str | None = None
    """With stop reason ``error``: the cause's exception class (``CheckError``, ``ModelError``...); ``error``
    holds the message."""
    stop_limit: StopLimit | None = None
    """With stop reason ``budget``: which limit stopped the task."""
    best_round: int | None = None
    """The round of the final answer (None: none)."""
    best_sample: int | None = None
    initial_sample: int | None = None
    """The sample of round 0's leader (None: none)."""
    grade: float | None = None
    """The held-out grade of the final answer, in [0, 1]; None when the task has no grade."""
    graded_pass: bool | None = None
    initial_grade: float | None = None
    """The held-out grade of round 0's leader; None when the task has no grade."""
    initial_graded_pass: bool | None = None
    attempts: int = 1
    """How many times the driver sent the task out: more than 1 when the machinery failed under it."""
    retried_for: list[str] = []
    """The cause of each earlier attempt's failure (``ActorDiedError``, ``CallTimeoutError``...): never the task's."""
    error_raised: str | None = None
    """With cause ``CheckError``: the class of what the check raised (``KeyError``...)."""
    error_where: str | None = None
    """With cause ``CheckError``: where it raised (``file.py:12 in fn``, the file's base name only)."""
    traceback: str | None = None
    """With cause ``CheckError``: the check's traceback, base names only."""
    grade_error: str | None = None
    """Set when the held-out grade could not be made (`Grade.error_type`: ``ProtocolError``, ``hung``...): the
    task is graded as failed, with this reason counted, never left out of the graded rate."""


class PlanVersion(_Frame, tag="plan", frozen=True, kw_only=True):
    """A plan as ``plan_execute`` revised it: every version is kept in the trace, with why it changed."""

    task_id: str
    round: int
    version: int
    """1 for the first plan, then one more per revision."""
    reason: str
    steps: list[PlanStep] = []
    trigger_step: int | None = None
    """The step whose observation prompted the revision (None for the first plan)."""
    observation: Observation | None = None
    """That observation (without its files)."""
    added: list[int] = []
    """Step numbers (in this version) that the previous version did not have."""
    removed: list[int] = []
    """Step numbers (in the previous version) that this one dropped."""
    changed: list[int] = []
    """Step numbers whose intent, inputs, output or contract changed."""
    kept: list[int] = []
    """Verified steps kept, with their outputs: the rest run again."""


class GradeRequest(_Frame, tag="grade_request", frozen=True, kw_only=True):
    """Driver -> grader, after the loop: grade these candidates against the task's held-out gold."""

    task: Task
    candidates: list[CandidateText] = []


class Grade(_Frame, tag="grade", frozen=True, kw_only=True):
    """Grader -> driver: the held-out grade of each candidate, and the gold it was graded against."""

    task_id: str
    gold: dict[str, Any] = {}
    grades: list[CandidateGrade] = []
    error: str | None = None
    """Set when the grade itself could not be made (a grade function that raised, a grade no frame could carry, a
    grader that hung, a judge that answered nothing valid): every candidate asked about is then graded as failed,
    with this reason (`redraft.engine.grader.failed_grade`), so the task stays in the graded rate."""
    judge: str | None = None
    """The judge's model, as its backend named it (what its calls are priced by), when a model graded
    (``--judge``); None for the scenario's own grade."""
    usage: Usage = Usage()
    """What the judge's calls spent (0 USD as sent: the driver prices it, as the arbiter prices the loop's)."""
    error_type: str | None = None
    """With ``error``: its cause, typed (the exception's class, ``hung``...): what the run's tables count it by."""
