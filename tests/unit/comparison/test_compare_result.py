"""comparison.json's regression gate: which earlier files it reads, and what it calls a regression."""

from __future__ import annotations

import json
from pathlib import Path

from redraft.comparison._analysis import Comparison, Interval
from redraft.comparison._result import read_json, regressions
from tests.integration.test_compare_browser import arm


def test_the_gate_reads_an_earlier_comparison_whose_differences_are_laid_out_otherwise(tmp_path: Path) -> None:
    """Only the arms' names and graded pass rates are read: differences of another layout do not matter."""
    earlier = {
        "scenario": "arithmetic",
        "match": "calls",
        "tasks": 80,
        "arms": [{"name": "adversarial", "pass_rate": 0.9}, {"name": "self_refine", "pass_rate": None}],
        "baselines": [],
        "against_baselines": [{"a": "adversarial", "b": "best_of_n", "mcnemar_p": 0.06, "within_noise": False}],
        "between_arms": [],
    }
    path = tmp_path / "comparison.json"
    path.write_text(json.dumps(earlier))
    new = Comparison(
        scenario="arithmetic",
        match="calls",
        tasks=80,
        arms=[arm("adversarial", 0.6, 3.0), arm("self_refine", 0.5, 3.0)],
        baselines=[],
        against_baselines=[],
        between_arms=[],
    )
    new.arms[0].ci = Interval(0.5, 0.7)
    [line] = regressions(new, read_json(path))
    assert line.startswith("arm adversarial: graded pass rate 60.0% (95% CI 50.0%-70.0%)")
