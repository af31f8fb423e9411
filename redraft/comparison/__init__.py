"""Comparing critic strategies on the same tasks, against sampling at matched cost: `compare` (with its
`CompareSettings` and `CompareHooks`), and what it returns (`ComparisonOutcome`, holding the `Comparison`'s
figures); the plan, its lanes and the tables the command ``redraft compare`` (`redraft.cli`) prints; people's
judgements of the arms, read from their ``labels.jsonl`` files whenever asked (`human_judgements`)."""

from redraft.comparison._analysis import ArmFigures, Comparison, Curve, Difference
from redraft.comparison._api import (
    MATCHES,
    CompareHooks,
    CompareSettings,
    ComparisonOutcome,
    compare,
    default_out,
    judged_by,
    write,
)
from redraft.comparison._arms import Arm, arms_from_file, arms_from_names
from redraft.comparison._gate import regression_lines
from redraft.comparison._html import terminal_header, terminal_rows
from redraft.comparison._human import HumanJudgements, HumanPreference, HumanRate, human_judgements
from redraft.comparison._judged import JudgeNote, judge_note, untrusted
from redraft.comparison._result import read_json
from redraft.comparison._runner import ComparePlan, run_comparison

__all__ = [
    "MATCHES",
    "Arm",
    "ArmFigures",
    "CompareHooks",
    "ComparePlan",
    "CompareSettings",
    "Comparison",
    "ComparisonOutcome",
    "Curve",
    "Difference",
    "HumanJudgements",
    "HumanPreference",
    "HumanRate",
    "JudgeNote",
    "arms_from_file",
    "arms_from_names",
    "compare",
    "default_out",
    "human_judgements",
    "judge_note",
    "judged_by",
    "read_json",
    "regression_lines",
    "run_comparison",
    "terminal_header",
    "terminal_rows",
    "untrusted",
    "write",
]
