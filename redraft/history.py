"""One task's evolution, rebuilt from its trace frames: rounds, candidates, checks, critiques, decisions.

The views (`redraft.report_pages`, `redraft.trace_view`) render this, not the raw
frames. It is built from frames as plain dicts, tolerantly: a frame of an unknown
kind is kept (next to its candidate in `Candidate.others` when it names a round
and sample, else in `Round.others` or `TaskHistory.others`), and unknown fields
of known kinds come out of `extra`, so a view can show them generically. The
only things views leave out are empty values (None, "", [], 0: the defaults of
fields a frame did not use; for unknown kinds only blanks, see `is_blank`) and
request seeds. Nothing here raises on a frame it
does not understand.

A candidate is a ``draft`` frame; the ``verification`` and ``critique`` frames of
the same round and sample (and ``stage``, when frames carry one) attach to it.
Several critiques per candidate (two critics) are all kept. The "best so far"
after each round is the candidate the round's ``decision`` names.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from redraft.runreader import Frame

# Fields a view renders in its own way; every other field of these kinds is "extra".
KNOWN_FIELDS: dict[str, frozenset[str]] = {
    "task": frozenset({"kind", "v", "task_id", "scenario", "prompt", "reference"}),
    "draft": frozenset(
        {
            "kind",
            "v",
            "task_id",
            "round",
            "sample",
            "text",
            "usage",
            "model",
            "finish_reason",
            "latency_s",
            "node_id",
            "stage",
        }
    ),
    "verification": frozenset(
        {
            "kind",
            "v",
            "task_id",
            "round",
            "sample",
            "score",
            "passed",
            "answer",
            "checks",
            "stage",
            "questions",
        }
    ),
    "critique": frozenset({"kind", "v", "task_id", "round", "sample", "issues", "usage", "model", "error", "stance"}),
    "decision": frozenset(
        {
            "kind",
            "v",
            "task_id",
            "round",
            "action",
            "reason",
            "best_round",
            "best_sample",
            "best_score",
            "round_best_score",
            "rolled_back",
            "detail",
        }
    ),
}
# Requests (every kind named ``*_request``) repeat the task and the draft they carry;
# only their other fields are news.
REQUEST_REPEATS = frozenset({"kind", "v", "task", "draft", "task_id", "round", "sample"})


def extra(frame: Frame) -> dict[str, Any]:
    """The fields of ``frame`` that its kind's view does not render by name, unless empty.

    Empty values (None, "", [], {}, a usage of all zeros) are the defaults of
    fields a frame did not use; showing them would bury the ones that say something.
    """
    known = KNOWN_FIELDS.get(str(frame.get("kind")), frozenset({"kind", "v"}))
    return {k: v for k, v in frame.items() if k not in known and not is_empty(v)}


USAGE_KEYS = frozenset({"input_tokens", "output_tokens", "calls", "cached_tokens", "cost_usd", "cache_hits"})


def usage_line(value: Any) -> str | None:
    """A usage record in one line, or None if ``value`` is not one."""
    if not isinstance(value, dict) or not value or not set(value) <= USAGE_KEYS:
        return None
    line = (
        f"{value.get('calls', 0)} calls, {value.get('input_tokens', 0):,} in / "
        f"{value.get('output_tokens', 0):,} out tokens, ${value.get('cost_usd', 0.0):.4f}"
    )
    return line + (f", {value['cache_hits']} from the cache" if value.get("cache_hits") else "")


def frame_fields(frame: Frame, placed: tuple[str, ...] = ("task_id",)) -> dict[str, Any]:
    """The fields of a frame of unknown kind to show, less those its place on the page already says.

    ``placed``: the keys the surrounding view implies (the task; the round it is
    listed under; the candidate it sits beside).
    """
    skip = {"kind", "v", *placed}
    return {k: v for k, v in frame.items() if k not in skip and not is_blank(v)}


def is_blank(value: Any) -> bool:
    """None, "", [] or {}: no content at all (zeros may be data in a frame of unknown meaning)."""
    return value is None or value == "" or value == [] or value == {}


def is_empty(value: Any) -> bool:
    """None, "", [], {}, 0, False, or a dict of such (an unused usage)."""
    if value is None or value == "" or value == [] or value == {} or value is False or value == 0:
        return True
    return isinstance(value, dict) and all(is_empty(v) for v in value.values())


def request_news(rnd: Round) -> list[tuple[str, int, dict[str, Any]]]:
    """The round's requests as (kind, how many, fields), identical ones merged.

    Only fields a request adds to the frames it carries are kept; the seed is
    left out (it follows from the run seed, task, round and sample), and so is
    the revision, which views show on its own.
    """
    groups: dict[tuple[str, str], tuple[str, int, dict[str, Any]]] = {}
    for request in rnd.requests:
        news = {
            k: v
            for k, v in request.items()
            if k not in REQUEST_REPEATS and k not in ("seed", "revision") and not is_empty(v)
        }
        kind = str(request.get("kind"))
        key = (kind, repr(sorted(news.items())))
        _, count, _ = groups.get(key, (kind, 0, news))
        groups[key] = (kind, count + 1, news)
    return list(groups.values())


@dataclass
class Candidate:
    """One draft and what was said about it."""

    draft: Frame
    verification: Frame | None = None
    critiques: list[Frame] = field(default_factory=list)
    others: list[Frame] = field(default_factory=list)
    """Frames of kinds this version does not know about this candidate (e.g. a reflection on it)."""

    @property
    def sample(self) -> int:
        return int(self.draft.get("sample", -1))

    @property
    def stage(self) -> str | None:
        stage = self.draft.get("stage")
        return None if stage is None else str(stage)

    @property
    def text(self) -> str:
        return str(self.draft.get("text", ""))

    @property
    def score(self) -> float | None:
        return None if self.verification is None else float(self.verification.get("score", 0.0))

    @property
    def passed(self) -> bool | None:
        return None if self.verification is None else bool(self.verification.get("passed"))


@dataclass
class Round:
    number: int
    candidates: list[Candidate] = field(default_factory=list)
    decision: Frame | None = None
    requests: list[Frame] = field(default_factory=list)
    """Draft and verify requests (their new fields: seed, the revision the drafter was given)."""
    others: list[Frame] = field(default_factory=list)
    """Frames of kinds this version does not render by name, in trace order."""

    def candidate(self, sample: int) -> Candidate | None:
        """The last candidate of ``sample`` in this round (with stages: the latest stage)."""
        found = [c for c in self.candidates if c.sample == sample]
        return found[-1] if found else None


@dataclass
class BestStep:
    """The best-so-far candidate after one round, and how it differs from the one before."""

    round: int
    text: str
    score: float
    changed: bool
    diff: list[str]
    """Unified diff lines from the previous best (empty on round 0 or when unchanged)."""


@dataclass
class TaskHistory:
    task_id: str
    task: Frame | None
    result: Frame | None
    rounds: list[Round]
    others: list[Frame]
    """Frames outside any round (unknown kinds without a ``round`` field)."""

    def best_steps(self) -> list[BestStep]:
        """The best candidate after each decided round, with a diff whenever it changed."""
        steps: list[BestStep] = []
        previous: str | None = None
        for rnd in self.rounds:
            decision = rnd.decision
            if decision is None:
                continue
            best = self.best_of(decision)
            if best is None:
                continue
            text = best.text
            changed = previous is not None and text != previous
            diff = text_diff(previous, text, f"best after round {rnd.number - 1}", f"best after round {rnd.number}")
            steps.append(BestStep(rnd.number, text, float(decision.get("best_score", 0.0)), changed, diff))
            previous = text
        return steps

    def best_of(self, decision: Frame) -> Candidate | None:
        """The candidate a decision names as the best so far."""
        best_round, sample = decision.get("best_round"), decision.get("best_sample")
        if not isinstance(best_round, int) or not isinstance(sample, int) or best_round < 0:
            return None
        rnd = next((r for r in self.rounds if r.number == best_round), None)
        return rnd.candidate(sample) if rnd else None

    def passed_by_round(self, threshold: float = 1.0) -> list[bool]:
        """Whether the best so far passes, after each round that was decided."""
        states: list[bool] = []
        for rnd in self.rounds:
            if rnd.decision is None:
                continue
            best = self.best_of(rnd.decision)
            if best is not None and best.passed is not None:
                states.append(best.passed)
            else:  # older or foreign traces: fall back on the score
                states.append(float(rnd.decision.get("best_score", 0.0)) >= threshold)
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
    rounds: dict[int, Round] = {}
    history = TaskHistory(task_id=task_id, task=None, result=None, rounds=[], others=[])

    def round_of(frame: Frame) -> Round | None:
        number = frame.get("round")
        if not isinstance(number, int):
            draft = frame.get("draft")  # requests carry the round inside their draft
            number = draft.get("round") if isinstance(draft, dict) else None
        if not isinstance(number, int):
            return None
        return rounds.setdefault(number, Round(number))

    for frame in frames:
        kind = frame.get("kind")
        rnd = round_of(frame)
        if kind == "task":
            history.task = frame
        elif kind == "result":
            history.result = frame
        elif kind == "draft" and rnd is not None:
            rnd.candidates.append(Candidate(draft=frame))
        elif kind in ("verification", "critique") and rnd is not None:
            target = _target(rnd, frame)
            if target is None:
                rnd.others.append(frame)
            elif kind == "verification":
                target.verification = frame
            else:
                target.critiques.append(frame)
        elif kind == "decision" and rnd is not None:
            rnd.decision = frame
        elif str(kind).endswith("_request") and rnd is not None:
            rnd.requests.append(frame)
        elif rnd is not None:  # a kind this version does not know: next to its candidate if it names one
            target = _target(rnd, frame) if "sample" in frame else None
            (target.others if target is not None else rnd.others).append(frame)
        else:
            history.others.append(frame)
    history.rounds = [rounds[n] for n in sorted(rounds)]
    return history


def _target(rnd: Round, frame: Frame) -> Candidate | None:
    """The candidate a verification or critique is about: same sample, and same stage if given."""
    draft = frame.get("draft")
    source = draft if isinstance(draft, dict) else frame
    sample, stage = source.get("sample"), source.get("stage")
    for candidate in reversed(rnd.candidates):
        if candidate.sample == sample and (stage is None or candidate.stage == stage):
            return candidate
    return None
