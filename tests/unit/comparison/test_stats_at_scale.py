"""The baselines' and tests' figures at a hundred thousand tasks: the same figures as the definitions give, with the
work that repeats itself done once. Before, self-consistency drew and voted 400 times for each task and each n."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

import redraft.stats as stats
from redraft.stats import Sample, best_of_n, majority_vote, mcnemar
from redraft.stats._distributions import binomial_tail, clopper_pearson


def by_definition(samples: list[Sample], n: int, draws: int = 400, seed: int = 0) -> float:
    rng = random.Random(seed)
    return sum(stats._vote(rng.sample(range(len(samples)), n), samples) for _ in range(draws)) / draws


def some_samples(rng: random.Random, size: int) -> list[Sample]:
    return [
        Sample(score=rng.choice((0.0, 0.5, 1.0)), passed=rng.random() < 0.5, answer=rng.choice(("a", "b", None)))
        for _ in range(size)
    ]


def test_self_consistency_is_the_draw_by_draw_figure_bit_for_bit() -> None:
    rng = random.Random(7)
    for _ in range(20):
        samples = some_samples(rng, rng.randrange(2, 9))
        for n in range(1, len(samples)):
            assert majority_vote(samples, n) == by_definition(samples, n)


def test_self_consistency_votes_once_per_distinct_choice_and_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    stats._majority_vote.cache_clear()
    votes: Counter[int] = Counter()
    real = stats._vote

    def counted(chosen: list[int], samples: list[Sample]) -> bool:
        votes[len(chosen)] += 1
        return real(chosen, samples)

    monkeypatch.setattr(stats, "_vote", counted)
    rng = random.Random(3)
    shape = some_samples(rng, 8)
    for task in range(50):  # 50 tasks whose samples have one shape: their answers differ, their agreement not
        samples = [Sample(s.score, s.passed, None if s.answer is None else f"{task}-{s.answer}") for s in shape]
        majority_vote(samples, 4)
    assert votes[4] <= math.comb(8, 4)


def test_best_of_n_is_its_formula_for_any_shape() -> None:
    rng = random.Random(5)
    for _ in range(40):
        samples = some_samples(rng, rng.randrange(1, 9))
        order = sorted(range(len(samples)), key=lambda i: (-samples[i].score, i))
        for n in range(1, len(samples) + 1):
            expected = sum(
                math.comb(len(samples) - 1 - j, n - 1) * samples[i].passed for j, i in enumerate(order)
            ) / math.comb(len(samples), n)
            assert best_of_n(samples, n) == expected


@pytest.mark.parametrize(("only_a", "only_b"), [(0, 0), (3, 9), (400, 371), (1_500, 1_540)])
def test_mcnemar_is_the_exact_binomial_sum(only_a: int, only_b: int) -> None:
    a = [True] * only_a + [False] * only_b + [True] * 5
    b = [False] * only_a + [True] * only_b + [True] * 5
    d = only_a + only_b
    exact = min(1.0, 2 * sum(math.comb(d, k) for k in range(min(only_a, only_b) + 1)) / 2**d)
    assert mcnemar(a, b) == exact


def test_clopper_pearson_bounds_are_where_the_tails_cross_alpha() -> None:
    low, high = clopper_pearson(40, 100, 0.05)
    assert binomial_tail(100, low, range(40, 101)) == pytest.approx(0.025, abs=1e-9)
    assert binomial_tail(100, high, range(41)) == pytest.approx(0.025, abs=1e-9)


def test_a_binomial_tail_leaves_out_only_terms_that_are_zero_in_a_double() -> None:
    def every_term(n: int, theta: float, ks: range) -> float:
        log_theta, log_rest, log_n = math.log(theta), math.log1p(-theta), math.lgamma(n + 1)
        return math.fsum(
            math.exp(log_n - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_theta + (n - k) * log_rest)
            for k in ks
        )

    rng = random.Random(11)
    for _ in range(300):
        n, theta = rng.choice((1, 2, 7, 60, 900, 20_000)), rng.uniform(1e-6, 1 - 1e-6)
        k = rng.randrange(n + 1)
        for ks in (range(k, n + 1), range(k + 1)):
            assert binomial_tail(n, theta, ks) == every_term(n, theta, ks)
