"""A comparison recovers known pass rates: a scripted model right with known chances, compared end to end.

`replies.coin` drafts a right answer with chance p and revises to one with chance q,
each draw seeded by the request's seed; wrong answers fail the feedback (a wrong
step) and right ones pass it. So the truth is known in closed form:

- the arm (adversarial, one sample, three rounds, threshold 1) stops exactly at its
  first right draft: pass rate ``1 - (1 - p)(1 - q)^2``, mean calls
  ``1 + 2(1 - p) + 2(1 - p)(1 - q)`` (a draft, then a critique and a revision per
  wrong round but the last);
- best-of-n and self-consistency pick a right sample whenever one of n is right:
  ``1 - (1 - p)^n``.

The run is deterministic (seeded), so whether each known value lies inside its
interval is fixed too; the task count is chosen so the intervals are narrow enough
to mean something (about ±0.1).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from redraft import RunConfig
from redraft.comparison._analysis import Comparison
from redraft.comparison._arms import arms_from_names
from redraft.comparison._result import build
from redraft.comparison._runner import BASELINE, ComparePlan, run_comparison
from redraft.rundir import result_records
from tests.support.replies import coin

pytestmark = pytest.mark.ray

TASKS = 80
ROUNDS = 3
N = 8


def known_arm_rate(p: float, q: float, rounds: int) -> float:
    return 1 - (1 - p) * (1 - q) ** (rounds - 1)


def known_arm_calls(p: float, q: float, rounds: int) -> float:
    """A draft per round reached, and a critique for each wrong round before the last."""
    return 1 + sum(2 * (1 - p) * (1 - q) ** (r - 1) for r in range(1, rounds))


def known_best_of(p: float, n: float) -> float:
    """At a fractional budget, linear between the integer budgets around it, as compare interpolates."""
    low = math.floor(n)
    return (1 - (n - low)) * (1 - (1 - p) ** low) + (n - low) * (1 - (1 - p) ** (low + 1))


def band(rate: float, tasks: int) -> float:
    """Half the width of a 95 % normal interval of a mean of ``tasks`` Bernoulli(rate) (a per-task
    best-of-n estimate varies less than one Bernoulli draw, so this is on the safe side)."""
    return 1.96 * math.sqrt(rate * (1 - rate) / tasks)


@pytest.fixture(scope="module")
def comparison(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Comparison, Path]:
    out = tmp_path_factory.mktemp("compare")
    base = RunConfig.build(
        scenario="arithmetic",
        drafter="scripted:tests.support.replies:coin",
        critic="scripted:tests.support.replies:coin",
        samples=1,
        max_rounds=ROUNDS,
        threshold=1.0,
        limit=TASKS,
        seed=11,
        max_tasks_in_flight=16,
    )
    plan = ComparePlan(base=base, arms=arms_from_names("adversarial"), out=out, baseline_samples=N)
    run_comparison(plan)
    return build(plan, "calls"), out


def test_the_arm_s_interval_holds_its_known_pass_rate(comparison: tuple[Comparison, Path]) -> None:
    result, _ = comparison
    [arm] = result.arms
    truth = known_arm_rate(coin.p, coin.q, ROUNDS)
    assert arm.tasks == TASKS and arm.ungraded == 0
    assert arm.ci.low <= truth <= arm.ci.high, (truth, arm.pass_rate, arm.ci)
    assert arm.ci.high - arm.ci.low < 0.25  # an interval narrow enough to have missed
    assert arm.initial_pass_rate == pytest.approx(coin.p, abs=band(coin.p, TASKS))
    # After each round: the chance that some draft so far was right.
    for r, rate in enumerate(arm.pass_rate_by_round):
        expected = known_arm_rate(coin.p, coin.q, r + 1)
        assert rate == pytest.approx(expected, abs=band(expected, TASKS)), r
    # What the loop believed is what the grade says: right answers pass both, wrong ones neither.
    assert arm.feedback_pass_rate == arm.pass_rate


def test_the_baseline_curves_follow_the_known_best_of_n(comparison: tuple[Comparison, Path]) -> None:
    result, _ = comparison
    for curve in result.baselines:
        assert curve.samples == N and len(curve.pass_rate) == N
        assert curve.mean_calls_per_sample == 1.0  # a sample is one draft; checks are no model calls
        for n, rate in enumerate(curve.pass_rate, start=1):
            expected = known_best_of(coin.p, n)
            assert rate == pytest.approx(expected, abs=band(expected, TASKS)), (curve.name, n)
        assert curve.pass_rate == sorted(curve.pass_rate)  # more samples never hurt a best-of-n pick
        # The baseline's own rate at N, as the table shows it, with an interval that holds the known truth.
        assert curve.tasks == TASKS and len(curve.ci) == N
        assert curve.ci[-1].low <= known_best_of(coin.p, N) <= curve.ci[-1].high, (curve.name, curve.ci[-1])


def test_the_matched_budget_is_the_arm_s_measured_calls_and_the_difference_holds_the_truth(
    comparison: tuple[Comparison, Path],
) -> None:
    result, out = comparison
    [arm] = result.arms
    records = result_records(out / "arms" / "adversarial")
    measured = sum(r["usage"]["calls"] for r in records) / len(records)
    assert len(records) == TASKS
    assert arm.mean_calls == pytest.approx(measured)
    expected_calls = known_arm_calls(coin.p, coin.q, ROUNDS)
    assert measured == pytest.approx(expected_calls, abs=0.3)
    baseline_records = (out / BASELINE / "results.jsonl").read_text().splitlines()
    assert {json.loads(line)["usage"]["calls"] for line in baseline_records} == {N}
    assert {d.b for d in result.against_baselines} == {"best_of_n", "self_consistency"}
    for difference in result.against_baselines:
        assert difference.a == arm.name and difference.budget == pytest.approx(measured)
        truth = known_arm_rate(coin.p, coin.q, ROUNDS) - known_best_of(coin.p, measured)
        assert difference.ci.low <= truth <= difference.ci.high, (difference.b, truth, difference.ci)
        # Refinement at about three calls beats three samples by far more than the noise here.
        assert difference.significant and difference.mean > 0 and difference.ci.low > 0
    assert result.notes == []  # neither held at N nor within noise
