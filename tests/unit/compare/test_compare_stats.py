"""The comparison's statistics against brute force, and intervals that cover what they should."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from redraft.compare.stats import (
    Sample,
    at_budget,
    best_of_n,
    bootstrap_ci,
    majority_vote,
    mcnemar,
    paired_ci,
    within_noise,
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


def test_the_bootstrap_interval_covers_the_true_rate_about_95_times_in_100() -> None:
    rng = random.Random(7)
    covered = 0
    for trial in range(200):
        values = [float(rng.random() < 0.3) for _ in range(80)]
        low, high = bootstrap_ci(values, seed=trial, resamples=400)
        covered += low <= 0.3 <= high
    assert 0.88 <= covered / 200 <= 0.99


def test_paired_difference_and_noise() -> None:
    a, b = [1.0, 1.0, 0.0, 1.0] * 10, [0.0, 1.0, 0.0, 0.0] * 10
    mean, interval = paired_ci(a, b)
    assert mean == pytest.approx(0.5) and interval[0] > 0 and not within_noise(interval)
    _, same = paired_ci(a, a)
    assert same == (0.0, 0.0) and within_noise(same)
    with pytest.raises(ValueError, match="the same tasks"):
        paired_ci(a, b[:-1])


def test_mcnemar_is_the_exact_binomial_test_of_the_discordant_pairs() -> None:
    a = [True] * 8 + [False] * 2 + [True] * 5
    b = [False] * 8 + [True] * 2 + [True] * 5  # 8 vs 2 discordant
    # P(X <= 2 | 10, 0.5) = 56 / 1024, two-sided: 112 / 1024
    assert mcnemar(a, b) == pytest.approx(112 / 1024)
    assert mcnemar(a, a) == 1.0 and mcnemar([True], [False]) == 1.0
