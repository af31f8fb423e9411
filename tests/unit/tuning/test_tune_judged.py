"""A tune with a judge selects and decides on the judge's rubric scores and says whose they are; its evaluations
are ordinary judged runs (the judge's lanes of tests/unit/comparison/test_compare_judged.py), read back here."""

from __future__ import annotations

import json
from pathlib import Path

from redraft import RunConfig
from redraft.tuning._evaluate import read_evaluation
from redraft.tuning._verdict import decide
from tests.support import judges
from tests.unit.comparison.test_compare_feedback_basis import CHECK
from tests.unit.comparison.test_compare_judged import JUDGE, judged_lane


def test_a_judged_evaluation_s_figures_are_the_judge_s_grades_and_the_verdict_names_the_judge(tmp_path: Path) -> None:
    rubric = tmp_path / "test.json"
    rubric.write_text(json.dumps(judges.RUBRIC))
    config = RunConfig.build(scenario=CHECK, samples=2, max_rounds=2, judge=JUDGE, rubric=str(rubric))
    judged_lane(tmp_path / "c0", config)
    start = read_evaluation("c0", "test", tmp_path / "c0", tmp_path)
    assert start.graded and start.judge == JUDGE
    assert set(start.figures.values()) <= {0.0, 1.0} and 0 < start.mean < 1  # rubric scores, not the feedback's 1.0
    assert start.feedback_mean == 1.0  # every task passes its feedback once revised: the judge disagrees on some
    verdict = decide(start, start)
    assert f"test tasks' grades by the judge {JUDGE}, difference +0.000" in verdict.says and not verdict.adopted
