"""Judged grades for open-ended work: a judge model grades final answers by a rubric, or in pairs in both
orders, after the loop and apart from it; and the card that measures a judge before its grades are trusted.

`Judge` grades (`Judgment`) and compares (`PairVerdict`); `load_rubric` reads a `Rubric`; `calibrate` makes a
judge's card (`JudgeCard`) from labelled answers.
"""

from redraft.judging.judge import JUDGE_SETTINGS, CriterionGrade, Judge, Judgment, PairVerdict, judge_prompts
from redraft.judging.rubric import Criterion, Level, Rubric, load_rubric, reworded, rubric_of

__all__ = [
    "JUDGE_SETTINGS",
    "Criterion",
    "CriterionGrade",
    "Judge",
    "Judgment",
    "Level",
    "PairVerdict",
    "Rubric",
    "judge_prompts",
    "load_rubric",
    "reworded",
    "rubric_of",
]
