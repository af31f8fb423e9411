"""The convergence protocol: a pure state machine that decides whether a task goes on.

It is fed the leader of each round (the arbiter's top-ranked candidate) with the
resources spent so far, and answers a `Verdict`: continue, or stop with exactly
one reason. It does no I/O and knows nothing of Ray, so every path is unit-tested.

Invariant: `best` is the highest-scoring candidate seen in any round, never just
the latest. A round whose leader scores below the best is *rolled back*: the best
is kept and the next revision starts from it again.

Precedence when several reasons hold at once (first wins):

1. ``error``          the task cannot continue (`fail`; no round is scored)
2. ``threshold``      the best score reached the quality threshold
3. ``budget``         tokens, calls, seconds or USD ran out, or the next round would overrun
4. ``max_rounds``     the cycle limit was reached
5. ``stable``         the leader repeats an earlier round's leader (text delta < epsilon), unless it
                      is unchanged only because its patch edits were refused (a failed revision)
6. ``no_improvement`` the best score did not improve for ``patience`` rounds

Rules 5 and 6 are heuristics: with ``heuristics`` off (a strategy that decides for itself when a task has
stopped paying, such as ``adaptive``) only rules 1 to 4 stop a task, and the strategy stops it otherwise.

See docs/architecture.md, section "Why the convergence protocol's precedence".
"""

from __future__ import annotations

import difflib
from typing import Literal

import msgspec

from redraft.protocols.messages import StopLimit, StopReason, Usage


class Budget(msgspec.Struct, frozen=True, kw_only=True):
    """Per-task resource limits; ``None`` means unlimited."""

    max_tokens: int | None = None
    max_calls: int | None = None
    max_seconds: float | None = None
    max_usd: float | None = None


class ConvergenceConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The knobs of the protocol (all per task)."""

    threshold: float = 1.0
    """Stop as soon as the best score is at least this."""
    max_rounds: int = 3
    """Cycle limit: rounds in all, the initial draft (round 0) included."""
    patience: int = 2
    """Stop after this many rounds in a row without a better best score."""
    stable_epsilon: float = 0.02
    """A leader whose text differs by less than this (1 - similarity) from an earlier leader is a repeat."""
    budget: Budget = Budget()
    heuristics: bool = True
    """False: neither a repeated leader (``stable``) nor ``patience`` rounds without a better score
    (``no_improvement``) stop the task; the strategy decides (one that declares `Strategy.stops_itself`)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold}")
        if self.max_rounds < 1:
            raise ValueError(f"max_rounds must be at least 1, got {self.max_rounds}")
        if self.patience < 1:
            raise ValueError(f"patience must be at least 1, got {self.patience}")
        if not 0.0 <= self.stable_epsilon < 1.0:
            raise ValueError(f"stable_epsilon must be in [0, 1), got {self.stable_epsilon}")


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    """A round's leader as the protocol sees it."""

    round: int
    sample: int
    text: str
    score: float


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """The protocol's answer after a round (the arbiter wraps it in a `Decision` message)."""

    action: Literal["continue", "stop"]
    reason: StopReason | None
    best: Candidate | None
    rolled_back: bool = False
    detail: str = ""
    limit: StopLimit | None = None
    """With reason ``budget``: the limit that ran out."""


def text_delta(a: str, b: str) -> float:
    """1 - similarity of two texts after whitespace normalisation (0 means identical)."""
    na, nb = " ".join(a.split()), " ".join(b.split())
    if na == nb:
        return 0.0
    return 1.0 - difflib.SequenceMatcher(None, na, nb, autojunk=False).ratio()


class ConvergenceProtocol:
    """One task's convergence state. Feed it each round's leader with `observe`."""

    def __init__(self, config: ConvergenceConfig) -> None:
        self.config = config
        self.best: Candidate | None = None
        self._leaders: list[Candidate] = []
        self._stale_rounds = 0
        self._last_round_usage = Usage()
        self._last_round_seconds = 0.0
        self._spent_before_round = Usage()
        self._elapsed_before_round = 0.0

    def observe(
        self, leader: Candidate, *, spent: Usage, elapsed_s: float, refused: bool = False, tie_wins: bool = False
    ) -> Verdict:
        """Record ``leader`` (this round's top candidate); ``spent``/``elapsed_s`` are task totals.

        ``refused``: the leader is the best so far left unchanged because none of its
        patch edits applied. That is a failed revision, not convergence: it is not
        judged ``stable``, so the refusal reaches the drafter in the next round.
        ``tie_wins``: a leader that ties the best's score replaces it (the strategy ranked it above the best
        on what breaks ties, such as agreement over every round); the score did not improve all the same.
        """
        rolled_back = self.best is not None and leader.score < self.best.score
        if self.best is None or leader.score > self.best.score:
            self.best = leader
            self._stale_rounds = 0
        else:
            if tie_wins and leader.score == self.best.score:
                self.best = leader
            self._stale_rounds += 1
        repeat_of = None if refused or not self.config.heuristics else self._repeat_of(leader)
        self._leaders.append(leader)
        self._last_round_usage = spent - self._spent_before_round
        self._last_round_seconds = elapsed_s - self._elapsed_before_round
        self._spent_before_round, self._elapsed_before_round = spent, elapsed_s

        reason, detail, limit = self._stop_reason(leader, spent, elapsed_s, repeat_of)
        return Verdict(
            action="continue" if reason is None else "stop",
            reason=reason,
            best=self.best,
            rolled_back=rolled_back,
            detail=detail,
            limit=limit,
        )

    def fail(self, cause: str) -> Verdict:
        """The task cannot continue; stop with ``error``, still returning the best so far."""
        return Verdict(action="stop", reason="error", best=self.best, detail=cause)

    def _stop_reason(
        self, leader: Candidate, spent: Usage, elapsed_s: float, repeat_of: Candidate | None
    ) -> tuple[StopReason | None, str, StopLimit | None]:
        cfg = self.config
        assert self.best is not None
        if self.best.score >= cfg.threshold:
            return "threshold", f"best score {self.best.score:.3g} >= threshold {cfg.threshold:.3g}", None
        over = self._budget_exhausted(spent, elapsed_s)
        if over is not None:
            return "budget", over[1], over[0]
        if leader.round + 1 >= cfg.max_rounds:
            return "max_rounds", f"reached the cycle limit of {cfg.max_rounds} round(s)", None
        if repeat_of is not None:
            return "stable", f"round {leader.round} repeats the leader of round {repeat_of.round}", None
        if cfg.heuristics and self._stale_rounds >= cfg.patience:
            return "no_improvement", f"no better score for {self._stale_rounds} round(s)", None
        return None, "", None

    def _budget_exhausted(self, spent: Usage, elapsed_s: float) -> tuple[StopLimit, str] | None:
        """Which budget is spent, or would be by another round like the last one, and how (None if none)."""
        b = self.config.budget
        next_round = self._last_round_usage
        limits: list[tuple[StopLimit, str, float | None, float, float]] = [
            ("tokens", "tokens", b.max_tokens, spent.total_tokens, next_round.total_tokens),
            ("calls", "calls", b.max_calls, spent.calls, next_round.calls),
            ("task_timeout", "seconds", b.max_seconds, elapsed_s, self._last_round_seconds),
            ("usd", "USD", b.max_usd, spent.cost_usd, next_round.cost_usd),
        ]
        for kind, name, limit, used, per_round in limits:
            if limit is None:
                continue
            if used >= limit:
                return kind, f"{name} budget spent: {used:g} of {limit:g}"
            if used + per_round > limit:
                return kind, f"{name} budget: {used:g} of {limit:g} used, another round needs ~{per_round:g}"
        return None

    def _repeat_of(self, leader: Candidate) -> Candidate | None:
        for earlier in self._leaders:
            if text_delta(earlier.text, leader.text) < self.config.stable_epsilon:
                return earlier
        return None
