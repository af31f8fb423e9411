"""The statistics of comparisons and judges: sampling baselines at any budget, confidence intervals, paired tests.

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
- `wilson`: the interval of a pass rate over tasks.
- `paired`: the difference of two arms over the same tasks, its p value and its
  interval, from one test.

The tests and the intervals are computed in the standard library (`redraft.stats._distributions`)
and checked against scipy and statsmodels in the tests.

See docs/architecture.md, section "Intervals and paired tests".
"""

from __future__ import annotations

import functools
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

from redraft.stats._distributions import beside, clopper_pearson, t_critical, t_two_sided_p

ALPHA = 0.05
"""Every interval is at level 1 - ALPHA (95 %); a paired difference is significant when its p value is below it."""
Method = Literal["exact_mcnemar", "paired_t"]


@dataclass(frozen=True)
class Sample:
    """One independent sample of a task: what the loop saw (feedback score, answer) and its held-out grade."""

    score: float
    passed: bool
    answer: str | None = None


_SHAPES = 1 << 16
"""Tasks' sample shapes a baseline's figures remember: at 100,000 tasks, most tasks' samples share a shape."""


def best_of_n(samples: Sequence[Sample], n: int) -> float:
    """Expected graded pass of the sample with the best feedback among n of ``samples`` drawn at random.

    Ties in feedback go to the earlier sample, as `best_of_n` the strategy does;
    the samples are exchangeable, so this order is as good as a random one.
    """
    big = len(samples)
    if not 1 <= n <= big:
        raise ValueError(f"n must be in [1, {big}], got {n}")
    return _best_of_n(tuple((s.score, s.passed) for s in samples), n)


@functools.lru_cache(maxsize=_SHAPES)
def _best_of_n(shape: tuple[tuple[float, bool], ...], n: int) -> float:
    big = len(shape)
    order = sorted(range(big), key=lambda i: (-shape[i][0], i))
    total = math.comb(big, n)
    return sum(math.comb(big - 1 - j, n - 1) * shape[i][1] for j, i in enumerate(order)) / total


def majority_vote(samples: Sequence[Sample], n: int, *, draws: int = 400, seed: int = 0) -> float:
    """Expected graded pass of self-consistency's pick among n of ``samples`` (feedback, then agreement)."""
    big = len(samples)
    if not 1 <= n <= big:
        raise ValueError(f"n must be in [1, {big}], got {n}")
    if n == big:
        return float(_vote([*range(big)], samples))
    return _majority_vote(_shape(samples), n, draws, seed)


def _shape(samples: Sequence[Sample]) -> tuple[tuple[float, bool, int], ...]:
    """What a vote depends on: each sample's score, its pass, and which answer it gave (numbered by first
    appearance; -1 for none): samples of the same shape vote alike, draw for draw."""
    answers: dict[str, int] = {}
    return tuple(
        (s.score, s.passed, -1 if s.answer is None else answers.setdefault(s.answer, len(answers))) for s in samples
    )


@functools.lru_cache(maxsize=_SHAPES)
def _majority_vote(shape: tuple[tuple[float, bool, int], ...], n: int, draws: int, seed: int) -> float:
    samples = [Sample(score, passed, None if answer < 0 else str(answer)) for score, passed, answer in shape]
    return sum(times * _vote([*chosen], samples) for chosen, times in _draws(len(shape), n, draws, seed)) / draws


@functools.lru_cache(maxsize=256)
def _draws(big: int, n: int, draws: int, seed: int) -> list[tuple[tuple[int, ...], int]]:
    """The ``draws`` random choices of n of ``big`` samples (the same for every task), as each distinct choice and
    how often it was drawn: a vote depends on which samples were chosen only, and C(8, 4) is 70, not 400."""
    rng = random.Random(seed)
    return list(Counter(tuple(sorted(rng.sample(range(big), n))) for _ in range(draws)).items())


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


def wilson(successes: float, n: int) -> tuple[float, float]:
    """Wilson's score interval of a pass rate: ``successes`` (a sum of values in [0, 1]) of ``n`` tasks."""
    if n == 0:
        return (math.nan, math.nan)
    z = NormalDist().inv_cdf(1 - ALPHA / 2)
    rate, spread = successes / n, z * z / n
    centre = (rate + spread / 2) / (1 + spread)
    half = z / (1 + spread) * math.sqrt(rate * (1 - rate) / n + spread / (4 * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Paired:
    """``a - b`` over the same tasks: the mean, and the p value and interval of one test."""

    method: Method
    mean: float
    low: float
    high: float
    p: float | None
    """None when the test has nothing to go on (no task; for t, no spread)."""

    @property
    def significant(self) -> bool:
        """p < `ALPHA`; the interval excludes 0 exactly then."""
        return self.p is not None and self.p < ALPHA


def paired(a: Sequence[float], b: Sequence[float]) -> Paired:
    """The difference of ``a`` and ``b``, one figure per task each: exact McNemar if all are 0 or 1, else t."""
    if len(a) != len(b):
        raise ValueError(f"paired figures need the same tasks: {len(a)} vs {len(b)}")
    if all(v in (0.0, 1.0) for v in (*a, *b)):
        return exact_mcnemar([v == 1.0 for v in a], [v == 1.0 for v in b])
    return paired_t(a, b)


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> float:
    """The exact two-sided McNemar p value: are the discordant pairs split evenly?"""
    only_a, only_b = _discordant(a, b)
    discordant = only_a + only_b
    tail = term = 1  # C(d, 0), then each C(d, k) from the one before: exact, without recomputing each from scratch
    for k in range(1, min(only_a, only_b) + 1):
        term = term * (discordant - k + 1) // k
        tail += term
    p: float = 2 * tail / 2**discordant  # the integers divided with one rounding: exact to a double
    return min(1.0, p)


def exact_mcnemar(a: Sequence[bool], b: Sequence[bool]) -> Paired:
    """The exact McNemar test of ``a`` against ``b`` and the interval of the difference that inverts it."""
    tasks = len(a)
    if tasks == 0:
        return Paired("exact_mcnemar", math.nan, math.nan, math.nan, None)
    only_a, only_b = _discordant(a, b)
    p = mcnemar(a, b)
    side = 0 if p >= ALPHA else 1 if only_a > only_b else -1
    theta_low, theta_high = beside(clopper_pearson(only_a, only_a + only_b, ALPHA), 0.5, side)
    share_low, share_high = wilson(only_a + only_b, tasks)
    low = (2 * theta_low - 1) * (share_high if theta_low < 0.5 else share_low)
    high = (2 * theta_high - 1) * (share_high if theta_high > 0.5 else share_low)
    return Paired("exact_mcnemar", (only_a - only_b) / tasks, low, high, p)


def paired_t(a: Sequence[float], b: Sequence[float]) -> Paired:
    """The paired t-test of ``a`` against ``b`` and its t interval (clipped to [-1, 1])."""
    differences = [x - y for x, y in zip(a, b, strict=True)]
    n = len(differences)
    if n == 0:
        return Paired("paired_t", math.nan, math.nan, math.nan, None)
    mean = math.fsum(differences) / n
    if n < 2 or max(differences) == min(differences):
        return Paired("paired_t", mean, -1.0, 1.0, None)
    error = math.sqrt(math.fsum((d - mean) ** 2 for d in differences) / (n - 1) / n)
    p = t_two_sided_p(mean / error, n - 1)
    reach = t_critical(n - 1, ALPHA) * error
    side = 0 if p >= ALPHA else 1 if mean > 0 else -1
    low, high = beside((mean - reach, mean + reach), 0.0, side)
    return Paired("paired_t", mean, max(-1.0, low), min(1.0, high), p)


def _discordant(a: Sequence[bool], b: Sequence[bool]) -> tuple[int, int]:
    """Tasks where only ``a`` passes, and where only ``b`` does."""
    pairs = list(zip(a, b, strict=True))
    return sum(1 for x, y in pairs if x and not y), sum(1 for x, y in pairs if y and not x)
