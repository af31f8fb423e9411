"""The records embedded in protocol messages: usage, checks, issues, attempts, revisions.

They never travel alone: each is a field of a frame in `redraft.protocols.messages`,
which re-exports them, and follows the same evolution rules (new fields get
defaults and go last; anything else is a new wire version).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from redraft.plaintext import plain_text

RevisionMode = Literal["rewrite", "patch"]
StopReason = Literal["threshold", "budget", "max_rounds", "stable", "no_improvement", "error"]
StopLimit = Literal["tokens", "calls", "usd", "task_timeout", "run_deadline"]
"""Which limit a ``budget`` stop hit: a per-task budget (tokens, calls, USD, the task timeout) or the run's deadline."""
Severity = Literal["critical", "major", "minor"]
ChatRole = Literal["system", "user", "assistant"]
"""Who speaks one turn of a chat prompt (not to be confused with `RoleName`, the agents of the loop)."""
RoleName = Literal["drafter", "critic", "self_critic", "verifier", "grader", "judge"]
"""The agents of the loop: who writes, attacks, checks and (after the loop, apart from it) grades a candidate:
the grader by the scenario's program, the judge by a model and a rubric (``--judge``)."""
Stance = Literal["adversarial", "self", "skeptic"]
"""Which instructions a critic is given: a separate hostile critic, the drafter's own model, or a debate's
second critic that doubts the first."""

Action = Literal["fresh", "revise", "critique", "escalate"]
"""What a model call of an adaptive round was for: a fresh sample, a revision of the best so far with the
verifier's feedback, a revision that also carries a critique of it (the critique is charged to it), or a
revision with the feedback written by the run's stronger model (``--escalate``: the drafter sends it there)."""
FeedbackState = Literal["first", "none", "score", "localized", "near"]
"""What the verifier's feedback on the best candidate so far offers a revision: nothing yet (``first``, before
any candidate), no signal (``none``: failed with nothing said), a score only (``score``), a localized failure
(``localized``: a failed check that says what failed, such as a failed example or an error message), or a
near pass (``near``)."""

MAX_ISSUE_TEXT = 100
"""Characters in each text field of an `Issue`: bounds a grammar-constrained critique so it finishes
inside its token limit (the schema models answer with is made from this type)."""


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens and calls spent by one or more model calls."""

    input_tokens: int = 0
    """Prompt tokens, as the backend reported them."""
    output_tokens: int = 0
    """Completion tokens, as the backend reported them."""
    calls: int = 0
    """Number of model calls."""
    cached_tokens: int = 0
    """Prompt tokens the provider served from its prompt cache (a subset of ``input_tokens``)."""
    cost_usd: float = 0.0
    """What the calls cost at the price table, response-cache hits included at what they cost when they were
    paid: the cost the results rest on, the same with or without the cache (priced once, by
    `redraft.backends.pricing.PriceTable.priced`; 0 in role replies)."""
    cache_hits: int = 0
    """Calls answered by the response cache (their tokens were paid for once, earlier)."""
    batch_calls: int = 0
    """Calls answered through a provider's batch API (``--batch``), priced at its batch price."""
    saved_calls: int = 0
    """Of ``cache_hits``, the calls another run had paid for: this run paid nothing for them. A hit on a call
    this run paid for itself, before it was interrupted and resumed, is not one: this run paid it once."""
    saved_usd: float = 0.0
    """What ``saved_calls`` cost at the price table: part of ``cost_usd``, not spent by this run."""
    cache_write_tokens: int = 0
    """Prompt tokens written to the provider's prompt cache (Anthropic's cache writes, priced above the input
    price; a subset of ``input_tokens``, apart from ``cached_tokens``)."""
    prompt_cache_saved_usd: float = 0.0
    """What the provider's prompt cache saved: the cached tokens at the input price less what they and the
    cache writes cost (priced with ``cost_usd``; negative when writes were not read back)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            calls=self.calls + other.calls,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            cache_hits=self.cache_hits + other.cache_hits,
            batch_calls=self.batch_calls + other.batch_calls,
            saved_calls=self.saved_calls + other.saved_calls,
            saved_usd=self.saved_usd + other.saved_usd,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            prompt_cache_saved_usd=self.prompt_cache_saved_usd + other.prompt_cache_saved_usd,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens - other.input_tokens,
            output_tokens=self.output_tokens - other.output_tokens,
            calls=self.calls - other.calls,
            cached_tokens=self.cached_tokens - other.cached_tokens,
            cost_usd=self.cost_usd - other.cost_usd,
            cache_hits=self.cache_hits - other.cache_hits,
            batch_calls=self.batch_calls - other.batch_calls,
            saved_calls=self.saved_calls - other.saved_calls,
            saved_usd=self.saved_usd - other.saved_usd,
            cache_write_tokens=self.cache_write_tokens - other.cache_write_tokens,
            prompt_cache_saved_usd=self.prompt_cache_saved_usd - other.prompt_cache_saved_usd,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def spent_usd(self) -> float:
        """USD this run paid: ``cost_usd`` less what the response cache saved it (``saved_usd``)."""
        return max(0.0, self.cost_usd - self.saved_usd)  # sums of the two may differ in their last bits


class ChatMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One turn of a chat prompt."""

    role: ChatRole
    content: str


class CheckResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of one deterministic check of a candidate."""

    name: str
    """Short identifier of the check, e.g. ``final_answer`` or ``tests``."""
    passed: bool
    score: float
    """In [0, 1]."""
    detail: str = ""
    """Why it failed (or what it saw); shown to the drafter on revision."""

    def plain(self) -> CheckResult:
        """This result with its text made plain (`redraft.plaintext.plain_text`): a check's words may quote a
        candidate's, and a frame carries UTF-8 only."""
        name, detail = plain_text(self.name), plain_text(self.detail)
        if name == self.name and detail == self.detail:
            return self
        return msgspec.structs.replace(self, name=name, detail=detail)


class Issue(msgspec.Struct, frozen=True, kw_only=True):
    """One concrete fault a critic found in a candidate.

    Critic models answer with a list of these (``redraft.engine._answers.CritiqueReport``,
    whose JSON Schema is generated from this Struct).
    """

    severity: Severity
    """How bad: critical (the answer is wrong), major, or minor."""
    quote: Annotated[str, msgspec.Meta(max_length=MAX_ISSUE_TEXT)]
    """The exact span of the candidate that is wrong."""
    reason: Annotated[str, msgspec.Meta(max_length=MAX_ISSUE_TEXT)]
    """Why that span is wrong."""
    fix: Annotated[str, msgspec.Meta(max_length=MAX_ISSUE_TEXT)]
    """A concrete suggested correction."""


class VerificationQuestion(msgspec.Struct, frozen=True, kw_only=True):
    """One chain-of-verification question about a candidate, answered without seeing the candidate."""

    question: str
    answer: str


class StageStep(msgspec.Struct, frozen=True, kw_only=True):
    """Which step of a top-down (``stepwise``) solution a draft is, and what it builds on."""

    name: str
    index: int
    """0-based position among the scenario's stages."""
    total: int
    instruction: str
    """What to write at this stage."""
    previous: str = ""
    """The verified output of the previous stage ('' for the first)."""

    @property
    def final(self) -> bool:
        return self.index + 1 >= self.total


class Attempt(msgspec.Struct, frozen=True, kw_only=True):
    """A short memory of an earlier round, so the drafter does not oscillate."""

    round: int
    answer: str | None
    score: float
    summary: str
    """The main failure of that attempt, in one line."""
    reflection: str = ""
    """The drafter's own diagnosis of the failure (Reflexion); '' when not asked for."""


class Revision(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the drafter needs to revise: the best so far and the feedback."""

    best_text: str
    best_score: float
    failed_checks: list[CheckResult] = []
    issues: list[Issue] = []
    memory: list[Attempt] = []
    questions: list[VerificationQuestion] = []
    """Chain-of-verification questions about the best so far, with answers found independently of it."""


class CandidateText(msgspec.Struct, frozen=True, kw_only=True):
    """One candidate answer of a task, by the round and sample that wrote it (for grading)."""

    round: int
    sample: int
    text: str


class CandidateGrade(msgspec.Struct, frozen=True, kw_only=True):
    """The held-out grade of one candidate: gold answers, hidden tests. Never seen by the loop."""

    round: int
    sample: int
    score: float
    """In [0, 1]."""
    passed: bool
    detail: str = ""
    """Why it failed the grade (for people reading the run; never shown to a role)."""
    scores: list[float] = []
    """A judge's grade: the score of each of its judgments, when it was asked more than once (``--judge-repeats``;
    ``score`` is their mean)."""
    passes: list[bool] = []
    """A judge's grade: whether each of those judgments passed the rubric's threshold on its own."""


class Intent(msgspec.Struct, frozen=True, kw_only=True):
    """Why a strategy that chooses its calls asked for a draft: what for, on what feedback, against what best."""

    action: Action
    state: FeedbackState
    best_score: float | None = None
    """The task's best feedback score when the call was chosen (None before any candidate): the draft raised
    it if it scores higher."""
