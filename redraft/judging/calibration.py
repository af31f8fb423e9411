"""A judge's card: how far its grades can be trusted, measured before they are used.

`calibrate` asks a judge about answers whose verdict is known (a ``label`` per answer, from the user or from a
scenario's program grade) and measures six figures (`redraft.judging._figures`, each with its interval and a
pass against a threshold, `Thresholds`):

- ``agreement``: the share of labelled answers whose pass the judge gets right;
- ``kappa``: Cohen's kappa of the judge's passes against the labels (agreement beyond chance);
- ``position_flip_rate``: the share of pairs of one task's answers whose pairwise verdict changes when the
  order is swapped (pairs of a passing and a failing answer where labels tell them apart);
- ``length_bias``: the share of answers whose score rises when the same answer is padded with neutral text
  that adds nothing (`PADDING`);
- ``rubric_stability``: the share of verdicts that stay the same when the rubric is reworded: its layout
  changed, and in the user's or a model's words where given (`redraft.judging.rewording`; each kept on the card);
- ``repeatability``: the share of verdicts that stay the same when the same judgment is asked again (with
  another seed, so the response cache does not answer it).

The card passes when every figure does. Judgments that are not valid answers are counted (``invalid``) and
left out of the figures they would have entered.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import msgspec

from redraft.judging._figures import Figure, Verdict, kappa, share
from redraft.judging.judge import Judge, Judgment, PairVerdict
from redraft.judging.rewording import Rewording, layout_rewordings
from redraft.judging.rubric import Rubric
from redraft.protocols.messages import Task

T = TypeVar("T")
PADDING = (
    "\n\nThe answer is given above in full. The text that follows it restates nothing and adds nothing: it is here "
    "to make the answer longer, not better. Each part of the answer above stands as written, and no part of it "
    "depends on these lines. Nothing here should change how the answer above is read or graded."
)
"""What pads an answer for the length-bias figure: neutral, and longer than a short answer."""
MAX_PAIRS_PER_TASK = 4
HUMAN_LABELS_TRUSTED = 50
"""Human labels a card needs before it is said to measure the judge against people's judgement: under it, the
card says so (its figures stand, measured against what labelled the answers)."""
LabelSource = Literal["human", "program"]
"""Who labelled an answer: a person (a reviewer's label in a run's ``labels.jsonl``, the user's labels file, a
``--tasks`` file's ``label``) or a program (the scenario's grade)."""


class Thresholds(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What each figure must reach (``at least``) or stay under (``at most``), by its interval's far side."""

    agreement: float = 0.8
    """At least: the low end of the agreement's interval."""
    kappa: float = 0.6
    """At least: the low end of kappa's interval (0.6: "substantial" agreement beyond chance)."""
    position_flip_rate: float = 0.1
    """At most: the high end of the flip rate's interval."""
    length_bias: float = 0.1
    """At most: the high end of the interval of the share of answers padding raises."""
    rubric_stability: float = 0.9
    """At least: the low end of the share of verdicts a reworded rubric keeps."""
    repeatability: float = 0.9
    """At least: the low end of the share of verdicts the same judgment asked again keeps."""


class LabelledAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """An answer to a task, and whether it should pass (None: not known, it then enters no label figure)."""

    task: Task
    text: str
    label: bool | None = None
    source: LabelSource | None = None
    """Who gave ``label`` (None: no label, or not said)."""


class JudgeCard(msgspec.Struct, frozen=True, kw_only=True):
    """A judge's measured figures and whether each, and the whole card, passes (``judge-card.json``)."""

    judge: str
    """The judge's backend spec."""
    rubric: str
    prompts: dict[str, int]
    """The versions of the judge's prompt templates the card measured."""
    passed: bool
    figures: dict[str, Figure]
    answers: int
    labelled: int
    pairs: int
    invalid: int
    """Judgments whose reply was not a valid answer (left out of the figures)."""
    thresholds: Thresholds
    seed: int
    rewordings: list[Rewording] = []
    """The rubric as the rubric stability figure reworded it (its layout's, the user's or a model's words)."""
    human_labels: int | None = None
    """Labels given by people among ``labelled`` (None: a card written before cards counted them)."""
    program_labels: int | None = None
    """Labels that are a scenario's program grade among ``labelled``."""

    def labels_said(self) -> list[str]:
        """Who labelled the answers, in words, and, under `HUMAN_LABELS_TRUSTED` human labels, what that means."""
        if self.human_labels is None or self.program_labels is None:
            return []
        human, program = self.human_labels, self.program_labels
        unsaid = self.labelled - human - program
        said = [
            f"labels: {human} human {_plural(human, 'label')}, {program} program {_plural(program, 'grade')}"
            + (f", {unsaid} not said whose" if unsaid else "")
        ]
        if human < HUMAN_LABELS_TRUSTED:
            said.append(
                f"a judge's card needs {HUMAN_LABELS_TRUSTED} human labels to be trusted on people's judgement; "
                f"this one has {human}" + (": its agreement is with the scenario's program grade" if program else "")
            )
        return said

    @property
    def verdict(self) -> Verdict:
        """``pass`` when every figure passes; ``fail`` when any figure fails (`Figure.verdict`); else
        ``too_few``: no figure failed, but some were measured on fewer events than their interval needs."""
        verdicts = {f.verdict for f in self.figures.values()}
        if "fail" in verdicts:
            return "fail"
        return "too_few" if "too_few" in verdicts else "pass"

    def answers_needed(self) -> int:
        """About how many answers each figure with too few events needs, the most of them: a figure's events
        grow with the answers (``needs`` scaled by answers per event), or its own ``needs`` when it has none."""
        needed = [
            math.ceil(f.needs * self.answers / f.n) if f.n else f.needs
            for f in self.figures.values()
            if f.verdict == "too_few" and f.needs is not None
        ]
        return max(needed, default=self.answers)

    def said(self) -> str:
        """The card's verdict in words."""
        if self.verdict == "too_few":
            return (
                f"too few answers (n = {self.answers}, needs about {self.answers_needed()}): no figure failed, "
                "and none can pass on so few"
            )
        return "passed" if self.passed else "failed"


@dataclass
class _Asked:
    """What the judge said about the calibration set, before any figure is made of it."""

    first: list[Judgment] = field(default_factory=list)
    again: list[Judgment] = field(default_factory=list)
    padded: list[Judgment] = field(default_factory=list)
    rewordings: list[Rewording] = field(default_factory=list)
    reworded: list[list[Judgment]] = field(default_factory=list)
    pairs: list[PairVerdict] = field(default_factory=list)


def calibrate(
    judge: Judge,
    answers: Sequence[LabelledAnswer],
    *,
    thresholds: Thresholds | None = None,
    seed: int = 0,
    parallel: int = 8,
    judged: Callable[[], None] | None = None,
    rewordings: Sequence[Rewording] = (),
) -> JudgeCard:
    """``judge``'s card from ``answers`` (see the module docstring); the judge must have a rubric. ``judged``
    is called as each of the `judgments` (a grade, or a pair in both orders) comes back. ``rewordings``: the
    rubric in other words (the user's or a model's, `redraft.judging.rewording`), beside its layout's."""
    return asyncio.run(
        calibrate_async(
            judge, answers, thresholds=thresholds, seed=seed, parallel=parallel, judged=judged, rewordings=rewordings
        )
    )


async def calibrate_async(
    judge: Judge,
    answers: Sequence[LabelledAnswer],
    *,
    thresholds: Thresholds | None = None,
    seed: int = 0,
    parallel: int = 8,
    judged: Callable[[], None] | None = None,
    rewordings: Sequence[Rewording] = (),
) -> JudgeCard:
    """`calibrate` in a running event loop."""
    if judge.rubric is None:
        raise ValueError("a judge's card is measured with a rubric: give the judge one")
    every = [*layout_rewordings(judge.rubric), *rewordings]
    asked = await _ask(judge, answers, seed, asyncio.Semaphore(parallel), judged or (lambda: None), every)
    return card_of(judge, answers, asked, thresholds or Thresholds(), seed)


def judgments(rubric: Rubric, answers: Sequence[LabelledAnswer], rewordings: Sequence[Rewording] = ()) -> int:
    """How many judgments a card of ``answers`` asks for: each answer graded as it is, again, padded and under
    each reworded rubric (its layout's and ``rewordings``), and each pair (`pairs_of`) compared in both orders
    (one judgment of two calls)."""
    return len(answers) * (3 + len(layout_rewordings(rubric)) + len(rewordings)) + len(pairs_of(answers))


async def _ask(
    judge: Judge,
    answers: Sequence[LabelledAnswer],
    seed: int,
    gate: asyncio.Semaphore,
    judged: Callable[[], None],
    rewordings: Sequence[Rewording],
) -> _Asked:
    async def limited(call: Awaitable[T]) -> T:
        async with gate:
            done = await call
        judged()
        return done

    def each(seed: int, padding: str = "", rubric: Rubric | None = None) -> Awaitable[list[Judgment]]:
        return asyncio.gather(
            *(limited(judge.grade(a.task, a.text + padding, seed=seed, rubric=rubric)) for a in answers)
        )

    assert judge.rubric is not None
    asked = _Asked()
    asked.first = await each(seed)
    asked.again = await each(seed + 1)
    asked.padded = await each(seed, PADDING)
    asked.rewordings = list(rewordings)
    asked.reworded = [await each(seed, rubric=r.rubric) for r in rewordings]
    pairs = pairs_of(answers)
    asked.pairs = list(
        await asyncio.gather(*(limited(judge.compare(a.task, a.text, b.text, seed=seed)) for a, b in pairs))
    )
    return asked


def pairs_of(answers: Sequence[LabelledAnswer]) -> list[tuple[LabelledAnswer, LabelledAnswer]]:
    """Pairs of one task's answers to judge in both orders: a passing and a failing one where labels tell
    them apart, else any two; at most `MAX_PAIRS_PER_TASK` a task."""
    by_task: dict[str, list[LabelledAnswer]] = {}
    for answer in answers:
        by_task.setdefault(answer.task.task_id, []).append(answer)
    pairs = []
    for group in by_task.values():
        both = list(itertools.combinations(group, 2))
        apart = [(a, b) for a, b in both if None not in (a.label, b.label) and a.label != b.label]
        pairs += (apart or both)[:MAX_PAIRS_PER_TASK]
    return pairs


def card_of(
    judge: Judge, answers: Sequence[LabelledAnswer], asked: _Asked, thresholds: Thresholds, seed: int
) -> JudgeCard:
    """The card of what ``judge`` said (`_Asked`) about ``answers``."""
    first = asked.first
    labelled = [(j.passed, a.label) for j, a in zip(first, answers, strict=True) if a.label is not None]
    judged = [(bool(passed), bool(label)) for passed, label in labelled if passed is not None]
    figures = {
        "agreement": share([p == lbl for p, lbl in judged], thresholds.agreement, "at_least"),
        "kappa": kappa([p for p, _ in judged], [lbl for _, lbl in judged], thresholds.kappa, seed=seed),
        "position_flip_rate": share(
            [v.flipped for v in asked.pairs if v.error is None], thresholds.position_flip_rate, "at_most"
        ),
        "length_bias": share(_rises(first, asked.padded), thresholds.length_bias, "at_most"),
        "rubric_stability": share(
            [same for again in asked.reworded for same in _kept(first, again)], thresholds.rubric_stability, "at_least"
        ),
        "repeatability": share(_kept(first, asked.again), thresholds.repeatability, "at_least"),
    }
    every = [*first, *asked.again, *asked.padded, *itertools.chain.from_iterable(asked.reworded)]
    assert judge.rubric is not None
    return JudgeCard(
        judge=judge.spec,
        rubric=judge.rubric.name,
        prompts=judge.prompt_versions(),
        passed=all(f.passed for f in figures.values()),
        figures=figures,
        answers=len(answers),
        labelled=len(labelled),
        pairs=len(asked.pairs),
        invalid=sum(j.error is not None for j in every) + sum(v.error is not None for v in asked.pairs),
        thresholds=thresholds,
        seed=seed,
        rewordings=asked.rewordings,
        human_labels=sum(a.label is not None and a.source == "human" for a in answers),
        program_labels=sum(a.label is not None and a.source == "program" for a in answers),
    )


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def _kept(first: Sequence[Judgment], again: Sequence[Judgment]) -> list[bool]:
    """Whether each verdict was the same the second time (where both were valid)."""
    return [a.passed == b.passed for a, b in zip(first, again, strict=True) if None not in (a.passed, b.passed)]


def _rises(first: Sequence[Judgment], padded: Sequence[Judgment]) -> list[bool]:
    """Whether padding raised each answer's score (where both were valid)."""
    return [
        b.score > a.score + 1e-9
        for a, b in zip(first, padded, strict=True)
        if a.score is not None and b.score is not None
    ]
