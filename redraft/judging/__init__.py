"""Judged grades for open-ended work: a judge model grades final answers by a rubric, or in pairs in both
orders, after the loop and apart from it; and the card that measures a judge before its grades are trusted.

`Judge` grades (`Judgment`) and compares (`PairVerdict`); `load_rubric` reads a `Rubric`, `scenario_rubric` finds
a scenario's own; `calibrate` makes a judge's card (`JudgeCard`, written by `write_card`) from labelled answers
(`read_answers`, or a finished run's, `read_run_answers`).
"""

from redraft.judging._figures import Figure
from redraft.judging.answer_file import read_answers
from redraft.judging.calibration import (
    HUMAN_LABELS_TRUSTED,
    PADDING,
    JudgeCard,
    LabelledAnswer,
    LabelSource,
    Thresholds,
    calibrate,
    calibrate_async,
)
from redraft.judging.card import CARD_HTML, CARD_JSON, held_card, read_card, write_card
from redraft.judging.judge import (
    JUDGE_SETTINGS,
    CriterionGrade,
    Judge,
    Judgment,
    PairVerdict,
    judge_of,
    judge_prompts,
    priced_verdicts,
)
from redraft.judging.rewording import (
    REWORDINGS_FILE,
    Rewording,
    layout_rewordings,
    load_rewordings,
    model_rewordings,
    rewordings_by,
)
from redraft.judging.rubric import Criterion, Level, Rubric, load_rubric, reworded, rubric_of, scenario_rubric
from redraft.judging.run_answers import read_labels, read_run_answers

__all__ = [
    "CARD_HTML",
    "CARD_JSON",
    "HUMAN_LABELS_TRUSTED",
    "JUDGE_SETTINGS",
    "PADDING",
    "REWORDINGS_FILE",
    "Criterion",
    "CriterionGrade",
    "Figure",
    "Judge",
    "JudgeCard",
    "Judgment",
    "LabelSource",
    "LabelledAnswer",
    "Level",
    "PairVerdict",
    "Rewording",
    "Rubric",
    "Thresholds",
    "calibrate",
    "calibrate_async",
    "held_card",
    "judge_of",
    "judge_prompts",
    "layout_rewordings",
    "load_rewordings",
    "load_rubric",
    "model_rewordings",
    "priced_verdicts",
    "read_answers",
    "read_card",
    "read_labels",
    "read_run_answers",
    "reworded",
    "rewordings_by",
    "rubric_of",
    "scenario_rubric",
    "write_card",
]
