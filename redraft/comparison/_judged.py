"""A comparison graded by a judge (``--judge``): who judged, what its card says, how much it disagreed with itself,
and whether a regression gate may rest on its grades.

Every lane of a judged comparison is graded by the same judge and rubric, so the arms' pass rates and their
differences are judged grades. Their intervals already hold the judge's own noise: a task's verdict is one
draw of the judge, and the intervals count tasks (Wilson's over an arm's tasks, the paired test over the
tasks both arms graded), so whatever a judge would say differently on another asking widens the spread they
are computed from, as the task's own chance does. ``--judge-repeats N`` makes each verdict the rubric score
averaged over N judgments, which shrinks that part; `JudgeNote.disagreement` says how large it was (the share
of answers judged more than once whose judgments did not all agree).

A gate (``--fail-if-worse``) resting on judged grades needs a judge measured before its grades are trusted:
`untrusted` says in one line why it may not (no card, a card of another judge, rubric or prompts, or a card
that failed), and the command refuses unless ``--trust-judge`` is given.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import msgspec

from redraft.comparison._runner import ComparePlan
from redraft.engine.grader import JudgeSetup
from redraft.engine.resolution import BackendOverrides, resolve_run
from redraft.judging import Figure, JudgeCard, judge_prompts
from redraft.protocols.messages import Grade
from redraft.rundir.frames import KnownFrame
from redraft.rundir.reader import RunReader

Judged = tuple[JudgeSetup, JudgeCard | None, Path | None]
"""A comparison's judge, the card given for it (``--judge-card``) and that card's path."""


class JudgeNote(msgspec.Struct, frozen=True, kw_only=True):
    """Who graded a comparison, and what is known of how well (``comparison.json``'s ``judge``)."""

    judge: str
    """The judge's backend spec."""
    rubric: str
    repeats: int
    """Judgments per answer (``--judge-repeats``); each grade is their mean."""
    self_judged: bool
    """The judge is the drafter's own model."""
    card: str | None = None
    """The card given (``--judge-card``), as named."""
    card_passed: bool | None = None
    """Whether that card passed and speaks for this judge; None: no card was given."""
    card_says: str | None = None
    """Why it does not pass, in words (its failed figures, or the judge it measured instead)."""
    disagreement: float | None = None
    """Of the answers judged more than once, the share whose judgments did not all agree (None: none was)."""


def judge_of(plan: ComparePlan, backends: BackendOverrides | None = None) -> JudgeSetup | None:
    """The judge every lane of ``plan`` is graded by (they share it), resolved; None when the scenario grades."""
    return resolve_run(plan.lanes()[0].config, backends=backends).setup.judge


def judge_note(judge: JudgeSetup, card: JudgeCard | None, card_path: Path | None, lanes: Iterable[Path]) -> JudgeNote:
    """The note of a comparison judged by ``judge``, with its ``card`` (read from ``card_path``) held against it."""
    says = None if card is None else card_problem(judge, card)
    return JudgeNote(
        judge=judge.spec,
        rubric=judge.rubric,
        repeats=judge.repeats,
        self_judged=judge.self_judged,
        card=None if card_path is None else str(card_path),
        card_passed=None if card is None else says is None,
        card_says=says,
        disagreement=_disagreement(lanes),
    )


def card_problem(judge: JudgeSetup, card: JudgeCard) -> str | None:
    """Why ``card`` does not vouch for ``judge``'s grades: it measured another judge, rubric or prompts, or it failed;
    None when it vouches."""
    prompts = judge.prompts or judge_prompts().versions()
    if (card.judge, card.rubric, card.prompts) != (judge.spec, judge.rubric, prompts):
        return (
            f"it measured the judge {card.judge} by the rubric {card.rubric!r}, not {judge.spec} by {judge.rubric!r}"
            + (" (and other prompt versions)" if card.prompts != prompts else "")
        )
    if card.passed:
        return None
    if card.verdict == "too_few":
        return f"it measured {card.said()}"
    failed = [_short(name, f) for name, f in card.figures.items() if f.verdict == "fail"]
    few = [f"{name} (n = {f.n}, needs about {f.needs})" for name, f in card.figures.items() if f.verdict == "too_few"]
    return "it failed: " + ", ".join(failed) + (f"; too few for {', '.join(few)}" if few else "")


def untrusted(note: JudgeNote | None) -> str | None:
    """Why a regression gate may not rest on a judged comparison's grades, in one line; None when it may (no
    judge, or a card that passed and speaks for it)."""
    if note is None or note.card_passed:
        return None
    if note.card is None:
        return (
            f"--fail-if-worse would gate on grades by the judge {note.judge}, which has no card: measure it with "
            "`redraft judge calibrate` and give --judge-card FILE, or --trust-judge to gate on it unmeasured"
        )
    return (
        f"--fail-if-worse would gate on grades by the judge {note.judge}, and its card {note.card} does not vouch "
        f"for them: {note.card_says}; give --trust-judge to gate on it anyway"
    )


def _disagreement(lanes: Iterable[Path]) -> float | None:
    repeated = split = 0
    for root in lanes:
        for _, frames in RunReader(root).tasks():
            grades = (f.message for f in frames if isinstance(f, KnownFrame) and isinstance(f.message, Grade))
            for candidate in (g for grade in grades for g in grade.grades if len(g.passes) > 1):
                repeated += 1
                split += len(set(candidate.passes)) > 1
    return split / repeated if repeated else None


def _short(name: str, figure: Figure) -> str:
    """``kappa 0.31, its low end 0.12 (needs at least 0.6)``: a failed figure, with the side of its interval
    that failed (a value on the right side of its threshold fails when its interval crosses it: too few
    measured)."""
    if figure.value is None:
        return f"{name} {'undefined' if figure.n else 'unmeasured'}"
    at_least = figure.side == "at_least"
    end = figure.low if at_least else figure.high
    where = "" if end is None else f", its {'low' if at_least else 'high'} end {end:.2f}"
    return f"{name} {figure.value:.2f}{where} (needs {'at least' if at_least else 'at most'} {figure.threshold:g})"
