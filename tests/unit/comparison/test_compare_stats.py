"""The comparison's statistics against brute force, and intervals that cover what they should and agree with
their tests (the references, scipy and statsmodels, are in test_compare_references.py)."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import msgspec
import pytest

from redraft.comparison._analysis import Curve, arm_summary, between, matched_budget
from redraft.comparison._lane_figures import Behaviour, TaskFigures
from redraft.stats import (
    ALPHA,
    Sample,
    at_budget,
    best_of_n,
    exact_mcnemar,
    majority_vote,
    mcnemar,
    paired,
    paired_t,
    wilson,
)


def brute_best_of_n(samples: list[Sample], n: int) -> float:
    """Every n-subset, the one the feedback ranks first (earlier on ties): the mean of its grade."""
    picks = [
        min(subset, key=lambda i: (-samples[i].score, i)) for subset in itertools.combinations(range(len(samples)), n)
    ]
    return sum(samples[i].passed for i in picks) / len(picks)


def brute_majority(samples: list[Sample], n: int) -> float:
    outcomes = []
    for subset in itertools.combinations(range(len(samples)), n):
        counts = Counter(samples[i].answer for i in subset if samples[i].answer is not None)
        pick = min(subset, key=lambda i: (-samples[i].score, -counts[samples[i].answer] if samples[i].answer else 0, i))
        outcomes.append(samples[pick].passed)
    return sum(outcomes) / len(outcomes)


def random_samples(rng: random.Random, size: int) -> list[Sample]:
    return [
        Sample(score=rng.choice([0.0, 0.5, 1.0]), passed=rng.random() < 0.4, answer=rng.choice(["a", "b", "c", None]))
        for _ in range(size)
    ]


@pytest.mark.parametrize("seed", range(40))
def test_best_of_n_is_exactly_the_mean_over_every_subset(seed: int) -> None:
    rng = random.Random(seed)
    samples = random_samples(rng, rng.randint(1, 7))
    for n in range(1, len(samples) + 1):
        assert best_of_n(samples, n) == pytest.approx(brute_best_of_n(samples, n), abs=1e-12)


def test_best_of_n_reduces_to_pass_at_k_when_the_feedback_is_the_grade() -> None:
    # With a perfect selector, best-of-n is "at least one of n passes": the Codex paper's pass@k.
    import math

    samples = [Sample(score=float(p), passed=p) for p in [True, False, False, True, False, False]]
    for k in range(1, 7):
        expected = 1 - math.comb(6 - 2, k) / math.comb(6, k)
        assert best_of_n(samples, k) == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(10))
def test_majority_vote_matches_enumeration(seed: int) -> None:
    rng = random.Random(seed)
    samples = random_samples(rng, 6)
    for n in (1, 3, 6):
        assert majority_vote(samples, n, draws=4000, seed=seed) == pytest.approx(brute_majority(samples, n), abs=0.03)
    assert majority_vote(samples, 6) == brute_majority(samples, 6)  # all of them: no resampling at all


def test_a_fractional_budget_interpolates_and_the_bounds_are_checked() -> None:
    samples = [Sample(score=1.0, passed=False), Sample(score=0.0, passed=True), Sample(score=0.0, passed=True)]
    one, two = best_of_n(samples, 1), best_of_n(samples, 2)
    assert at_budget(best_of_n, samples, 1.25) == pytest.approx(0.75 * one + 0.25 * two)
    assert at_budget(best_of_n, samples, 0.3) == one and at_budget(best_of_n, samples, 9) == best_of_n(samples, 3)
    with pytest.raises(ValueError, match=r"n must be in \[1, 3\]"):
        best_of_n(samples, 4)


def task(task_id: str, passed: bool) -> TaskFigures:
    return TaskFigures(task_id, passed, passed, passed, calls=1, tokens=10, usd=0.0, wall_s=1.0)


def test_the_baselines_are_matched_at_the_cost_of_the_tasks_compared() -> None:
    graded = [TaskFigures(f"t{i}", True, True, True, calls=4, tokens=40, usd=0.4, wall_s=1.0) for i in range(6)]
    errored = [TaskFigures(f"e{i}", None, False, None, calls=0, tokens=0, usd=0.0, wall_s=1.0) for i in range(2)]
    arm = arm_summary("a", [graded + errored], Behaviour(), oracle=False)
    assert arm.mean_calls == 3.0  # what it spent over every task
    curve = Curve(
        name="best_of_n",
        samples=8,
        pass_rate=[0.5] * 8,
        mean_calls_per_sample=1.0,
        mean_tokens_per_sample=20.0,
        mean_usd_per_sample=0.1,
    )
    assert matched_budget(arm, curve, "calls") == 4.0  # and what the six tasks it is compared on cost
    assert matched_budget(arm, curve, "tokens") == 2.0
    assert matched_budget(arm, curve, "usd") == pytest.approx(4.0)
    earlier = msgspec.structs.replace(arm, compared_cost=None)  # a comparison.json written before the field
    assert matched_budget(earlier, curve, "calls") == 3.0


def test_an_arm_that_passed_every_task_gets_an_interval_not_a_point() -> None:
    arm = arm_summary("all", [[task(f"t{i}", True) for i in range(8)]], Behaviour(), oracle=False)
    assert arm.pass_rate == 1.0 and arm.ci.high == 1.0
    assert arm.ci.low == pytest.approx(8 / (8 + 1.959963984540054**2))  # Wilson's lower bound at 8 of 8
    assert arm.ci.low < 0.7
    none = arm_summary("none", [[task(f"t{i}", False) for i in range(8)]], Behaviour(), oracle=False)
    assert none.ci.low == 0.0 and none.ci.high > 0.3


def test_the_wilson_interval_covers_the_true_rate_about_95_times_in_100() -> None:
    rng = random.Random(7)
    for rate in (0.05, 0.3, 0.9):
        covered = 0
        for _ in range(400):
            passes = sum(rng.random() < rate for _ in range(40))
            low, high = wilson(passes, 40)
            covered += low <= rate <= high
        assert 0.92 <= covered / 400 <= 0.995, rate


def test_five_discordant_tasks_all_one_way_are_not_significant_by_either_figure() -> None:
    """The case where a bootstrap interval excluded 0 beside an exact McNemar p of 0.0625."""
    ours = {f"t{i}": 1.0 if i < 10 else 0.0 for i in range(20)}
    theirs = {f"t{i}": 1.0 if i < 5 else 0.0 for i in range(20)}
    difference = between("a", ours, "b", theirs)
    assert difference.test == "exact_mcnemar" and difference.mean == pytest.approx(0.25)
    assert difference.p == pytest.approx(0.0625)
    assert not difference.significant
    assert difference.ci.low <= 0.0 <= difference.ci.high
    six = between("a", {**ours, "t10": 1.0}, "b", theirs)  # a sixth: p = 1/32, and the interval leaves 0
    assert six.p == pytest.approx(1 / 32) and six.significant and six.ci.low > 0.0


@pytest.mark.parametrize("tasks", [1, 2, 5, 12, 30])
def test_the_exact_interval_excludes_0_exactly_when_mcnemar_says_significant(tasks: int) -> None:
    for only_a, only_b in itertools.product(range(tasks + 1), repeat=2):
        if only_a + only_b > tasks:
            continue
        a = [True] * only_a + [False] * only_b + [True] * (tasks - only_a - only_b)
        b = [False] * only_a + [True] * only_b + [True] * (tasks - only_a - only_b)
        result = exact_mcnemar(a, b)
        excludes = result.low > 0 or result.high < 0
        assert result.p == mcnemar(a, b)
        assert excludes == result.significant == (mcnemar(a, b) < ALPHA), (only_a, only_b)
        assert result.low <= result.mean <= result.high and result.low >= -1 and result.high <= 1


def test_no_discordant_task_gives_an_interval_not_a_point() -> None:
    result = exact_mcnemar([True] * 8 + [False] * 2, [True] * 8 + [False] * 2)
    assert result.mean == 0.0 and result.p == 1.0 and not result.significant
    _, high = wilson(0, 10)
    assert (result.low, result.high) == pytest.approx((-high, high)) and high > 0.2


@pytest.mark.parametrize(("share", "theta"), [(0.2, 0.5), (0.3, 1.0), (0.5, 0.8)])
def test_the_exact_interval_covers_the_true_difference(share: float, theta: float) -> None:
    """Discordant with chance ``share``, then a's way with chance ``theta``: Δ = share (2 theta - 1)."""
    rng = random.Random(11)
    truth, covered, trials = share * (2 * theta - 1), 0, 300
    for _ in range(trials):
        a, b = [], []
        for _ in range(40):
            differ, a_wins, both = rng.random() < share, rng.random() < theta, rng.random() < 0.5
            a.append(a_wins if differ else both)
            b.append((not a_wins) if differ else both)
        result = exact_mcnemar(a, b)
        covered += result.low <= truth <= result.high
    assert covered / trials >= 0.94


def test_means_go_to_the_paired_t_test_whose_interval_agrees_with_it() -> None:
    rng = random.Random(3)
    assert paired([1.0, 0.0, 1.0], [0.0, 0.0, 1.0]).method == "exact_mcnemar"
    assert paired([1.0, 0.5, 1.0], [0.0, 0.0, 1.0]).method == "paired_t"
    for trial in range(200):
        n = rng.randint(2, 25)
        shift = rng.choice([0.0, 0.1, 0.3])
        a = [min(1.0, rng.random() * 0.8 + shift) for _ in range(n)]
        b = [rng.random() * 0.8 for _ in range(n)]
        result = paired(a, b)
        assert result.method == "paired_t" and result.p is not None
        excludes = result.low > 0 or result.high < 0
        assert excludes == result.significant == (result.p < ALPHA), trial
        assert result.low <= result.mean <= result.high


def test_t_without_spread_has_no_p_and_the_whole_range() -> None:
    same = paired_t([0.5, 0.75, 1.0], [0.25, 0.5, 0.75])
    assert same.mean == pytest.approx(0.25) and same.p is None and not same.significant
    assert (same.low, same.high) == (-1.0, 1.0)
    assert paired_t([0.5], [0.0]).p is None
    with pytest.raises(ValueError, match="the same tasks"):
        paired([0.5, 1.0], [0.5])


def test_mcnemar_is_the_exact_binomial_test_of_the_discordant_pairs() -> None:
    a = [True] * 8 + [False] * 2 + [True] * 5
    b = [False] * 8 + [True] * 2 + [True] * 5  # 8 vs 2 discordant
    # P(X <= 2 | 10, 0.5) = 56 / 1024, two-sided: 112 / 1024
    assert mcnemar(a, b) == pytest.approx(112 / 1024)
    assert mcnemar(a, a) == 1.0 and mcnemar([True], [False]) == 1.0
