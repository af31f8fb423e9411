"""The statistics of a comparison: sampling baselines at any budget, confidence intervals, paired tests.

Every function is pure and seeded: the same inputs and seed give the same figures.

- `best_of_n`: the expected graded pass of "draw n samples, keep the one the
  feedback ranks first" from N >= n samples already drawn, computed exactly (the
  unbiased estimator of the Codex paper's pass@k, generalised from "any sample
  passes" to "the selected sample passes"): with the N samples in the selector's
  order, the j-th (0-based) is the one kept from a uniformly random n-subset with
  probability C(N-1-j, n-1) / C(N, n).
- `majority_vote`: the same for self-consistency (feedback first, then the
  share of the subset agreeing on the answer), by resampling n-subsets: its
  choice depends on the whole subset, so it has no closed form.
- `at_budget`: either one at a fractional budget, by linear interpolation
  between the two integer budgets around it.
- `bootstrap_ci`, `paired_ci`: percentile bootstrap over tasks (the unit the
  study samples), 95 % by default.
- `mcnemar`: the exact two-sided McNemar p value of paired binary outcomes.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Z = 0.95
"""The confidence level of every interval."""
RESAMPLES = 2000


@dataclass(frozen=True)
class Sample:
    """One independent sample of a task: what the loop saw (feedback score, answer) and its held-out grade."""

    score: float
    passed: bool
    answer: str | None = None


def best_of_n(samples: Sequence[Sample], n: int) -> float:
    """Expected graded pass of the sample with the best feedback among n of ``samples`` drawn at random.

    Ties in feedback go to the earlier sample, as `best_of_n` the strategy does;
    the samples are exchangeable, so this order is as good as a random one.
    """
    big = len(samples)
    if not 1 <= n <= big:
        raise ValueError(f"n must be in [1, {big}], got {n}")
    order = sorted(range(big), key=lambda i: (-samples[i].score, i))
    total = math.comb(big, n)
    return sum(math.comb(big - 1 - j, n - 1) * samples[i].passed for j, i in enumerate(order)) / total


def majority_vote(samples: Sequence[Sample], n: int, *, draws: int = 400, seed: int = 0) -> float:
    """Expected graded pass of self-consistency's pick among n of ``samples`` (feedback, then agreement)."""
    big = len(samples)
    if not 1 <= n <= big:
        raise ValueError(f"n must be in [1, {big}], got {n}")
    if n == big:
        return float(_vote([*range(big)], samples))
    rng = random.Random(seed)
    return sum(_vote(rng.sample(range(big), n), samples) for _ in range(draws)) / draws


def _vote(chosen: list[int], samples: Sequence[Sample]) -> bool:
    counts = Counter(samples[i].answer for i in chosen if samples[i].answer is not None)
    chosen.sort()

    def key(i: int) -> tuple[float, int, int]:
        answer = samples[i].answer
        return (-samples[i].score, -(counts[answer] if answer is not None else 0), i)

    return samples[min(chosen, key=key)].passed


Selector = Callable[[Sequence[Sample], int], float]


def at_budget(select: Selector, samples: Sequence[Sample], budget: float) -> float:
    """``select`` at a fractional number of samples: linear between the integer budgets around it.

    Below one sample it is the one-sample figure; above the samples drawn it is
    the figure at all of them (say so where it is shown: it is not measured).
    """
    low = min(max(math.floor(budget), 1), len(samples))
    high = min(low + 1, len(samples))
    weight = min(max(budget - low, 0.0), 1.0) if high > low else 0.0
    first = select(samples, low)
    return first if weight == 0.0 else (1 - weight) * first + weight * select(samples, high)


def bootstrap_ci(values: Sequence[float], *, seed: int = 0, resamples: int = RESAMPLES) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values`` (one per task)."""
    if not values:
        return (math.nan, math.nan)
    rng = random.Random(seed)
    size = len(values)
    means = sorted(sum(rng.choices(values, k=size)) / size for _ in range(resamples))
    return _percentiles(means)


def paired_ci(a: Sequence[float], b: Sequence[float], *, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """The mean of ``a - b`` over the same tasks, and its bootstrap interval."""
    if len(a) != len(b):
        raise ValueError(f"paired figures need the same tasks: {len(a)} vs {len(b)}")
    differences = [x - y for x, y in zip(a, b, strict=True)]
    mean = sum(differences) / len(differences) if differences else math.nan
    return mean, bootstrap_ci(differences, seed=seed)


def _percentiles(sorted_values: Sequence[float]) -> tuple[float, float]:
    tail = (1 - Z) / 2
    last = len(sorted_values) - 1
    return sorted_values[round(tail * last)], sorted_values[round((1 - tail) * last)]


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> float:
    """The exact two-sided McNemar p value: are the discordant pairs split evenly?"""
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    tail: float = sum(math.comb(discordant, k) for k in range(min(only_a, only_b) + 1)) / 2**discordant
    return min(1.0, 2 * tail)


def within_noise(interval: tuple[float, float]) -> bool:
    """Whether a difference's interval holds 0: the data cannot tell the two apart."""
    low, high = interval
    return low <= 0.0 <= high
