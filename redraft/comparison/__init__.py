"""Comparing critic strategies on the same tasks, against sampling at matched cost: `compare`, and what it
returns (`ComparisonOutcome`, holding the `Comparison`'s figures). The command is ``redraft compare``."""

from redraft.comparison._analysis import ArmFigures, Comparison, Curve, Difference
from redraft.comparison._api import ComparisonOutcome, compare
from redraft.comparison._command import compare as compare_command
from redraft.comparison._gate import regression_lines

__all__ = [
    "ArmFigures",
    "Comparison",
    "ComparisonOutcome",
    "Curve",
    "Difference",
    "compare",
    "compare_command",
    "regression_lines",
]
