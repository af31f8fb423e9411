"""The figures on a judge's card, each with its interval and its verdict against a threshold.

Every figure is a share of like events (a proportion, with Wilson's interval from `redraft.stats`), except
Cohen's kappa, whose interval is a seeded percentile bootstrap over the labelled answers. A figure passes on
its interval's far side, not its value: "at least" figures when the interval's low end reaches the
threshold, "at most" figures when its high end stays under it. So a card measured on a handful of answers
cannot pass by luck.

Below the size its interval needs (``needs``) a figure's verdict is ``too_few``, not ``fail``: no judge could have
passed it. It is ``fail`` all the same when its interval already lies wholly on the wrong side of the threshold (an
"at least" figure's high end under it, an "at most" one's low end over it): more answers would not save it. A
figure with nothing to measure (no labels, no pairs) has no value and n = 0: too few. Kappa is undefined when the
judge and the labels are each all of one kind and alike (chance alone agrees on everything): its value is None
(null in ``judge-card.json``, "undefined" on screen), and it does not pass.

See docs/architecture.md, section "A judge's figures: how many events a verdict needs".
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from statistics import NormalDist
from typing import Literal

import msgspec

from redraft.stats import ALPHA, wilson

Side = Literal["at_least", "at_most"]
Verdict = Literal["pass", "fail", "too_few"]
"""A figure's verdict: ``too_few`` when it was measured on fewer events than its interval needs to pass at all."""
BOOTSTRAP_DRAWS = 2_000
_TOLERANCE = 1e-12
KAPPA_NEEDS = next(n for n in range(2, 64) if 2.0 ** (1 - n) < ALPHA / 2)
"""Labelled answers kappa's bootstrap needs before a judge that agrees on each could pass (see the docstring): 7."""


class Figure(msgspec.Struct, frozen=True, kw_only=True):
    """One measured figure of a judge: its value, its 95 % interval, the threshold and whether it passes."""

    value: float | None
    """None: nothing measured (n = 0), or a kappa that is undefined (the judge and the labels all alike)."""
    low: float | None
    high: float | None
    threshold: float
    passed: bool
    n: int
    """How many events it was measured on (answers, labelled answers, pairs, repeats)."""
    side: Side
    """``at_least``: the interval's low end must reach the threshold; ``at_most``: its high end must stay under."""
    needs: int | None = None
    """The events its interval needs before the figure could pass at all (`share_needs`, `KAPPA_NEEDS`); None
    when no number could (a threshold out of reach), and in cards written before it."""

    @property
    def verdict(self) -> Verdict:
        """``pass``; ``too_few`` below the events its interval needs (unless its interval already lies wholly
        on the wrong side of the threshold); else ``fail``."""
        if self.passed:
            return "pass"
        if self.needs is not None and self.n < self.needs and not self._beyond_saving():
            return "too_few"
        return "fail"

    def _beyond_saving(self) -> bool:
        """The interval lies wholly on the wrong side of the threshold: more events would not make it pass."""
        if self.side == "at_least":
            return self.high is not None and self.high < self.threshold - _TOLERANCE
        return self.low is not None and self.low > self.threshold + _TOLERANCE


def share(hits: Sequence[bool], threshold: float, side: Side) -> Figure:
    """The share of ``hits`` that are true, with Wilson's interval, passed on the interval's far side."""
    n, needs = len(hits), share_needs(threshold, side)
    if n == 0:
        return Figure(value=None, low=None, high=None, threshold=threshold, passed=False, n=0, side=side, needs=needs)
    low, high = wilson(sum(hits), n)
    return _figure(sum(hits) / n, low, high, threshold, n, side, needs)


def share_needs(threshold: float, side: Side) -> int | None:
    """The fewest events on which a share could pass at ``threshold`` by Wilson's interval: every event a hit
    (``at_least``) or none (``at_most``); None when no number of events could."""
    z2 = NormalDist().inv_cdf(1 - ALPHA / 2) ** 2
    if (side == "at_least" and threshold >= 1) or (side == "at_most" and threshold <= 0):
        return None
    odds = threshold / (1 - threshold) if side == "at_least" else (1 - threshold) / threshold
    n = max(1, math.ceil(z2 * odds))
    while n > 1 and _best_case_passes(n - 1, threshold, side):  # the closed form, checked against the interval
        n -= 1
    while not _best_case_passes(n, threshold, side):
        n += 1
    return n


def _best_case_passes(n: int, threshold: float, side: Side) -> bool:
    low, high = wilson(n if side == "at_least" else 0, n)
    return _passes(low, high, threshold, side)


def kappa(judged: Sequence[bool], labels: Sequence[bool], threshold: float, *, seed: int = 0) -> Figure:
    """Cohen's kappa of the judge's verdicts against the labels, with a seeded percentile bootstrap interval; a
    bootstrap draw whose kappa is undefined counts as 0 (no agreement beyond chance measured)."""
    pairs = list(zip(judged, labels, strict=True))
    needs = KAPPA_NEEDS if threshold <= 1 else None
    value = cohen_kappa(pairs) if pairs else None
    if value is None:
        return Figure(
            value=None,
            low=None,
            high=None,
            threshold=threshold,
            passed=False,
            n=len(pairs),
            side="at_least",
            needs=needs,
        )
    rng = random.Random(seed)
    draws = sorted(cohen_kappa([rng.choice(pairs) for _ in pairs]) or 0.0 for _ in range(BOOTSTRAP_DRAWS))
    low = draws[int(0.025 * BOOTSTRAP_DRAWS)]
    high = draws[min(math.ceil(0.975 * BOOTSTRAP_DRAWS), BOOTSTRAP_DRAWS - 1)]
    return _figure(value, low, high, threshold, len(pairs), "at_least", needs)


def cohen_kappa(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """Agreement beyond chance of two binary raters: (observed - expected) / (1 - expected). When chance alone
    would agree on everything (both raters constant and alike), it is 0 / 0: undefined, None."""
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    first, second = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
    expected = first * second + (1 - first) * (1 - second)
    return None if expected >= 1.0 else (observed - expected) / (1 - expected)


def _passes(low: float, high: float, threshold: float, side: Side) -> bool:
    return low >= threshold - _TOLERANCE if side == "at_least" else high <= threshold + _TOLERANCE


def _figure(value: float, low: float, high: float, threshold: float, n: int, side: Side, needs: int | None) -> Figure:
    passed = _passes(low, high, threshold, side)
    value, low, high = (_clean(x) for x in (value, low, high))
    return Figure(value=value, low=low, high=high, threshold=threshold, passed=passed, n=n, side=side, needs=needs)


def _clean(x: float) -> float:
    """``x`` without its last bits of rounding error: a kappa of -3e-16 is 0, never shown as -0.000."""
    return round(x, 12) + 0.0
