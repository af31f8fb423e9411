"""The figures on a judge's card, each with its interval and its pass against a threshold.

Every figure is a share of like events (a proportion, with Wilson's interval from `redraft.stats`), except
Cohen's kappa, whose interval is a seeded percentile bootstrap over the labelled answers. A figure passes on
its interval's far side, not its value: "at least" figures when the interval's low end reaches the
threshold, "at most" figures when its high end stays under it. So a card measured on a handful of answers
cannot pass by luck; at the default thresholds a figure needs about 35 events with none against it.
A figure with nothing to measure (no labels, no pairs) has no value and does not pass.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Literal

import msgspec

from redraft.stats import wilson

Side = Literal["at_least", "at_most"]
BOOTSTRAP_DRAWS = 2_000


class Figure(msgspec.Struct, frozen=True, kw_only=True):
    """One measured figure of a judge: its value, its 95 % interval, the threshold and whether it passes."""

    value: float | None
    low: float | None
    high: float | None
    threshold: float
    passed: bool
    n: int
    """How many events it was measured on (answers, labelled answers, pairs, repeats)."""
    side: Side
    """``at_least``: the interval's low end must reach the threshold; ``at_most``: its high end must stay under."""


def share(hits: Sequence[bool], threshold: float, side: Side) -> Figure:
    """The share of ``hits`` that are true, with Wilson's interval, passed on the interval's far side."""
    n = len(hits)
    if n == 0:
        return Figure(value=None, low=None, high=None, threshold=threshold, passed=False, n=0, side=side)
    low, high = wilson(sum(hits), n)
    return _figure(sum(hits) / n, low, high, threshold, n, side)


def kappa(judged: Sequence[bool], labels: Sequence[bool], threshold: float, *, seed: int = 0) -> Figure:
    """Cohen's kappa of the judge's verdicts against the labels, with a seeded percentile bootstrap interval."""
    pairs = list(zip(judged, labels, strict=True))
    if not pairs:
        return Figure(value=None, low=None, high=None, threshold=threshold, passed=False, n=0, side="at_least")
    rng = random.Random(seed)
    draws = sorted(cohen_kappa([rng.choice(pairs) for _ in pairs]) for _ in range(BOOTSTRAP_DRAWS))
    low = draws[int(0.025 * BOOTSTRAP_DRAWS)]
    high = draws[min(math.ceil(0.975 * BOOTSTRAP_DRAWS), BOOTSTRAP_DRAWS - 1)]
    return _figure(cohen_kappa(pairs), low, high, threshold, len(pairs), "at_least")


def cohen_kappa(pairs: Sequence[tuple[bool, bool]]) -> float:
    """Agreement beyond chance of two binary raters: (observed - expected) / (1 - expected). When chance alone
    would agree on everything (both raters constant and alike), there is nothing beyond chance to measure: 0."""
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    first, second = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
    expected = first * second + (1 - first) * (1 - second)
    return 0.0 if expected >= 1.0 else (observed - expected) / (1 - expected)


def _figure(value: float, low: float, high: float, threshold: float, n: int, side: Side) -> Figure:
    passed = low >= threshold - 1e-12 if side == "at_least" else high <= threshold + 1e-12
    value, low, high = (_clean(x) for x in (value, low, high))
    return Figure(value=value, low=low, high=high, threshold=threshold, passed=passed, n=n, side=side)


def _clean(x: float) -> float:
    """``x`` without its last bits of rounding error: a kappa of -3e-16 is 0, never shown as -0.000."""
    return round(x, 12) + 0.0
