"""The distributions the comparison's tests need, computed exactly in the standard library.

scipy is not a dependency of redraft (its tests check these functions against
it), so the binomial and Student's t are computed here:

- the binomial's tails by summing its terms in log space, which stays finite
  for any number of tasks;
- Student's t for a whole number of degrees of freedom by the finite series of
  Abramowitz and Stegun (26.7.3, 26.7.4), which needs no incomplete beta function.

An interval that inverts an exact test is held on the side of the pivot the
test decided (`beside`), so rounding in a bisection cannot make the two disagree.
"""

from __future__ import annotations

import math
from collections.abc import Callable

STEPS = 200
"""Bisection steps: enough to reach a double's resolution from any bracket in [0, 1000]."""


def binomial_tail(n: int, theta: float, ks: range) -> float:
    """P(X in ``ks``) for X ~ Binomial(n, ``theta``), 0 < theta < 1."""
    return _tail(n, _log_choose(n, ks), ks, theta)


def _log_choose(n: int, ks: range) -> list[float]:
    """log C(n, k) for each k of ``ks``: what a tail's terms share whatever theta (a bisection's many calls)."""
    log_n = math.lgamma(n + 1)
    return [log_n - math.lgamma(k + 1) - math.lgamma(n - k + 1) for k in ks]


def _tail(n: int, log_choose: list[float], ks: range, theta: float) -> float:
    """The sum of the binomial's terms for ``ks`` (contiguous), each in log space.

    A term's log is concave in k, so from the term nearest the mode outwards each side only falls: once one is below
    `_NEGLIGIBLE` (whose exp is exactly 0.0, by a margin no rounding closes), so is every term past it, and they are
    left out. fsum is exactly rounded whatever the order of its terms, so the sum is the one over every term."""
    log_theta, log_rest = math.log(theta), math.log1p(-theta)
    first = ks.start

    def term(i: int) -> float:
        k = first + i
        return log_choose[i] + k * log_theta + (n - k) * log_rest

    mode = min(max(int(n * theta) - first, 0), len(ks) - 1)
    logs = []
    for side in (range(mode, -1, -1), range(mode + 1, len(ks))):
        for i in side:
            if (log := term(i)) < _NEGLIGIBLE:
                break
            logs.append(log)
    return math.fsum(map(math.exp, logs))


_NEGLIGIBLE = -800.0
"""A term's log below which its exp is 0.0 in a double (anything below about -745 is)."""


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a binomial proportion, ``k`` of ``n``, at level 1 - ``alpha``."""
    if n == 0:
        return (0.0, 1.0)
    lower = 0.0
    if k > 0:
        above = range(k, n + 1)
        coefficients = _log_choose(n, above)  # once, not at each of the bisection's steps
        lower = root(lambda t: _tail(n, coefficients, above, t) - alpha / 2, (0.0, 1.0), rising=True)
    upper = 1.0
    if k < n:
        below = range(k + 1)
        coefficients = _log_choose(n, below)
        upper = root(lambda t: _tail(n, coefficients, below, t) - alpha / 2, (0.0, 1.0), rising=False)
    return lower, upper


def beside(interval: tuple[float, float], pivot: float, side: int) -> tuple[float, float]:
    """``interval`` held on the ``side`` of ``pivot`` an exact test decided: 1 above, -1 below, 0 holding it.

    The interval is that test's inversion, so this moves a bound only when
    rounding put it on the other side of a pivot it lies a hair's breadth from.
    """
    low, high = interval
    if side > 0:
        low = max(low, math.nextafter(pivot, math.inf))
    elif side < 0:
        high = min(high, math.nextafter(pivot, -math.inf))
    else:
        low, high = min(low, pivot), max(high, pivot)
    return low, high


def t_two_sided_p(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` >= 1 degrees of freedom."""
    if math.isinf(t):
        return 0.0
    theta = math.atan(abs(t) / math.sqrt(df))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    # A(t|df) = P(|T| < |t|): a finite series in cos²θ, odd and even df apart.
    term, total = 1.0, 1.0
    if df % 2 == 1:
        for j in range(1, (df - 1) // 2):
            term *= cos2 * (2 * j) / (2 * j + 1)
            total += term
        inside = (2 / math.pi) * (theta + (sin * math.cos(theta) * total if df > 1 else 0.0))
    else:
        for j in range(1, df // 2):
            term *= cos2 * (2 * j - 1) / (2 * j)
            total += term
        inside = sin * total
    return min(1.0, max(0.0, 1.0 - inside))


def t_critical(df: int, alpha: float) -> float:
    """The t with P(|T| >= t) = ``alpha`` for Student's t with ``df`` degrees of freedom."""
    return root(lambda t: t_two_sided_p(t, df) - alpha, (0.0, 1000.0), rising=False)


def root(f: Callable[[float], float], bracket: tuple[float, float], *, rising: bool) -> float:
    """The x in ``bracket`` where monotone ``f`` crosses 0, by bisection; ``rising``: f increases with x."""
    low, high = bracket
    for _ in range(STEPS):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        if (f(middle) < 0) == rising:
            low = middle
        else:
            high = middle
    return (low + high) / 2
