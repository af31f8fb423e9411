"""What ``redraft compare --baseline`` says of its gate: a warning for each way the baseline comparison ran other
tasks or another seed, then a line per regressed arm, or one line saying no arm regressed."""

from __future__ import annotations

import sys

from redraft.comparison import Comparison, regression_lines


def said_gate(comparison: Comparison) -> bool:
    """Print the gate's verdict on stderr (nothing without a baseline); whether an arm regressed."""
    gate = comparison.gate
    if gate is None:
        return False
    for line in gate.warnings:
        print(f"redraft: warning: {line}", file=sys.stderr)
    lines = regression_lines(gate, comparison.rate_name)
    for line in lines:  # said even without --fail-if-worse, which only decides the exit code
        print(f"redraft: regression: {line}", file=sys.stderr)
    if not lines:
        print(f"redraft: gate: no arm regressed against {gate.baseline}", file=sys.stderr)
    return bool(lines)
