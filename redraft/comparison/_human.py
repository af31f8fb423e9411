"""People's judgements of a comparison's arms: a human-labelled pass rate per arm, and a human-preference share per
pair of arms, beside the figures the grade (or a judge) gives.

They come from the ``labels.jsonl`` files people write (`redraft.rundir.labels`), read whenever asked
(`human_judgements`), so they take in labels given after the comparison ran:

- **Labels.** An arm's lane directories (``arms/NAME``, and its repeats) each keep their own; the comparison's
  directory may keep some too. A label counts for a lane when it is *current* there: the latest on the answer the
  lane gives now (its digest is that answer's), so a label on an answer a resume replaced does not count, and a
  label in the comparison's directory counts for every arm that gave the answer it judged. A lane's own label
  comes before the comparison directory's for the same task. A task's figure is its labels' pass share over the
  arm's repeats; the rate is over the labelled tasks only, with Wilson's interval over them (`redraft.stats`),
  and says how many tasks were labelled of how many the arm answered: a rate on a few hand-picked tasks is no
  estimate of the arm's rate on all of them.
- **Preferences.** The comparison directory's ``labels.jsonl`` holds which of two arms' answers a person preferred
  for a task. Per task and pair of arms the latest preference on the answers both arms give now counts (one
  on an answer since replaced is left out, and counted). A's share is its wins plus half the ties, over the tasks
  judged, with Wilson's interval; the ties are said.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import msgspec

from redraft.comparison._interval import Interval
from redraft.comparison._runner import lanes_in
from redraft.errors import UserError
from redraft.rundir import Judgements, Label, answer_digest, final_answers, read_judgements
from redraft.stats import wilson


class HumanRate(msgspec.Struct, frozen=True, kw_only=True):
    """One arm's pass rate by people's labels, on the tasks they labelled."""

    arm: str
    tasks: int
    """Tasks with a current label (on any repeat)."""
    answered: int
    """Tasks the arm answered (on any repeat): the labelled ones are a share of these."""
    labels: int
    """Current labels counted, over repeats."""
    pass_rate: float
    ci: Interval

    def said(self) -> str:
        return (
            f"people's labels: {self.arm} passes {self.pass_rate:.1%} of the {self.tasks} labelled tasks "
            f"(95% CI {self.ci.low:.1%} to {self.ci.high:.1%}; {self.tasks} of {self.answered} answered tasks "
            "labelled)"
        )


class HumanPreference(msgspec.Struct, frozen=True, kw_only=True):
    """Two arms' answers as people preferred them, task by task."""

    a: str
    b: str
    tasks: int
    """Tasks with a current preference between the two."""
    a_wins: int
    b_wins: int
    ties: int
    share: float
    """a's share: its wins and half the ties, over ``tasks``."""
    ci: Interval

    def said(self) -> str:
        return (
            f"people's preferences: {self.a} vs {self.b} over {self.tasks} tasks: {self.a} preferred on {self.a_wins}, "
            f"{self.b} on {self.b_wins}, {self.ties} tied; {self.a}'s share {self.share:.1%} (ties counted half; "
            f"95% CI {self.ci.low:.1%} to {self.ci.high:.1%})"
        )


class HumanJudgements(msgspec.Struct, frozen=True, kw_only=True):
    """What people said of a comparison's arms (see the module docstring)."""

    rates: list[HumanRate] = []
    preferences: list[HumanPreference] = []
    stale: int = 0
    """Preferences left out: on an answer an arm no longer gives (or an arm the comparison does not have)."""
    set_aside: int = 0
    """Lines of the ``labels.jsonl`` files read that were not judgements (torn, damaged)."""

    def notes(self) -> list[str]:
        """One line per figure, then what was left out: for the comparison's notes."""
        lines = [rate.said() for rate in self.rates] + [preference.said() for preference in self.preferences]
        if self.stale:
            lines.append(f"people's preferences: {self.stale} left out, on answers an arm no longer gives")
        if self.set_aside:
            lines.append(f"people's judgements: {self.set_aside} damaged line(s) of labels.jsonl skipped")
        return lines


def human_judgements(comparison: Path) -> HumanJudgements | None:
    """People's judgements of the comparison in the directory ``comparison``, read now from its ``labels.jsonl``
    files; None when nobody has judged it."""
    lanes = lanes_in(comparison)
    if not lanes:
        raise UserError(f"{comparison} is not a comparison directory (no arms/ lanes)")
    own = read_judgements(comparison)
    read = [(arm, read_judgements(folder)) for arm, folders in lanes.items() for folder in folders]
    if not (own.labels or own.preferences or own.set_aside) and not any(j.labels or j.set_aside for _, j in read):
        return None
    finals = {arm: [_answers(folder) for folder in folders] for arm, folders in lanes.items()}
    by_arm: dict[str, list[Judgements]] = {}
    for arm, judgements in read:
        by_arm.setdefault(arm, []).append(judgements)
    rates = [rate for arm in lanes if (rate := _rate(arm, by_arm[arm], finals[arm], own)) is not None]
    preferences, stale = _preferences(own, finals)
    set_aside = own.set_aside + sum(judgements.set_aside for _, judgements in read)
    return HumanJudgements(rates=rates, preferences=preferences, stale=stale, set_aside=set_aside)


def _answers(lane: Path) -> dict[str, str]:
    """The lane's final answers; none for a lane that is not a run yet (a comparison just starting it)."""
    try:
        return final_answers(lane)
    except UserError:
        return {}


def _rate(arm: str, lanes: list[Judgements], finals: list[dict[str, str]], own: Judgements) -> HumanRate | None:
    """The arm's rate over its repeats (each lane's judgements and final answers, in the same order)."""
    per_task: dict[str, list[float]] = {}
    for judgements, answers in zip(lanes, finals, strict=True):
        current: dict[str, Label] = own.current(answers) | judgements.current(answers)  # the lane's own first
        for task_id, label in current.items():
            per_task.setdefault(task_id, []).append(float(label.verdict == "pass"))
    if not per_task:
        return None
    figures = [math.fsum(passes) / len(passes) for passes in per_task.values()]
    return HumanRate(
        arm=arm,
        tasks=len(figures),
        answered=len({task_id for answers in finals for task_id in answers}),
        labels=sum(len(passes) for passes in per_task.values()),
        pass_rate=math.fsum(figures) / len(figures),
        ci=Interval(*wilson(math.fsum(figures), len(figures))),
    )


def _preferences(own: Judgements, finals: dict[str, list[dict[str, str]]]) -> tuple[list[HumanPreference], int]:
    """Each pair of arms' tally of current preferences (the latest per task and pair), and how many were not
    current."""
    given = {
        arm: {(task_id, answer_digest(text)) for answers in repeats for task_id, text in answers.items()}
        for arm, repeats in finals.items()
    }
    latest: dict[tuple[str, str, str], str | None] = {}
    stale = 0
    for preference in own.preferences:
        shown = zip(preference.shown, preference.digests, strict=True)
        if not all((preference.task_id, digest) in given.get(arm, set()) for arm, digest in shown):
            stale += 1
            continue
        first, second = sorted(preference.shown)
        latest[(preference.task_id, first, second)] = preference.winner
    tallies: dict[tuple[str, str], Counter[str | None]] = {}
    for (_, first, second), winner in latest.items():
        tallies.setdefault((first, second), Counter())[winner] += 1
    return [_share(a, b, tally) for (a, b), tally in sorted(tallies.items())], stale


def _share(a: str, b: str, tally: Counter[str | None]) -> HumanPreference:
    tasks = sum(tally.values())
    won = tally[a] + tally[None] / 2
    return HumanPreference(
        a=a,
        b=b,
        tasks=tasks,
        a_wins=tally[a],
        b_wins=tally[b],
        ties=tally[None],
        share=won / tasks,
        ci=Interval(*wilson(won, tasks)),
    )
