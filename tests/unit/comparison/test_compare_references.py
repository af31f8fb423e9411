"""Each statistic of a comparison against a reference implementation: scipy and statsmodels (the dev extra).

redraft computes them in the standard library (`redraft.stats._distributions`), so
nothing here is compared with itself.
"""

from __future__ import annotations

import itertools
import random

import pytest
from scipy import stats as scipy_stats
from statsmodels.stats.contingency_tables import mcnemar as statsmodels_mcnemar
from statsmodels.stats.proportion import proportion_confint

from redraft.stats import ALPHA, exact_mcnemar, mcnemar, paired_t, wilson
from redraft.stats._distributions import clopper_pearson, t_critical, t_two_sided_p

SIZES = [1, 2, 3, 5, 8, 13, 40, 200]


@pytest.mark.parametrize("n", SIZES)
def test_wilson_is_statsmodels_wilson(n: int) -> None:
    for k in range(n + 1):
        assert wilson(k, n) == pytest.approx(proportion_confint(k, n, alpha=ALPHA, method="wilson"), abs=1e-12)
    for successes in (0.5, n / 3, n - 0.25):  # means over repeats: a fractional count
        assert wilson(successes, n) == pytest.approx(proportion_confint(successes, n, method="wilson"), abs=1e-12)


@pytest.mark.parametrize("n", SIZES)
def test_clopper_pearson_is_scipy_s_exact_interval_and_statsmodels_beta(n: int) -> None:
    for k in range(n + 1):
        ours = clopper_pearson(k, n, ALPHA)
        exact = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=1 - ALPHA, method="exact")
        assert ours == pytest.approx((exact.low, exact.high), abs=1e-9), k
        assert ours == pytest.approx(proportion_confint(k, n, alpha=ALPHA, method="beta"), abs=1e-9), k


def tables(rng: random.Random) -> list[tuple[int, int, int, int]]:
    """(both pass, only a, only b, neither): every small table, and random larger ones."""
    small = [t for t in itertools.product(range(4), range(7), range(7), range(3))]
    large = [(rng.randint(0, 50), rng.randint(0, 40), rng.randint(0, 40), rng.randint(0, 50)) for _ in range(60)]
    return small + large


def outcomes(both: int, only_a: int, only_b: int, neither: int) -> tuple[list[bool], list[bool]]:
    a = [True] * both + [True] * only_a + [False] * only_b + [False] * neither
    b = [True] * both + [False] * only_a + [True] * only_b + [False] * neither
    return a, b


def test_mcnemar_is_statsmodels_exact_mcnemar_and_scipy_s_binomial_test() -> None:
    for both, only_a, only_b, neither in tables(random.Random(5)):
        a, b = outcomes(both, only_a, only_b, neither)
        reference = statsmodels_mcnemar([[both, only_a], [only_b, neither]], exact=True).pvalue
        assert mcnemar(a, b) == pytest.approx(reference, rel=1e-12), (only_a, only_b)
        if only_a + only_b:
            assert mcnemar(a, b) == pytest.approx(scipy_stats.binomtest(only_a, only_a + only_b).pvalue, rel=1e-12)


def test_the_exact_difference_interval_is_built_from_the_references_intervals() -> None:
    """Δ = π(2θ - 1): θ's interval is scipy's exact one, π's is statsmodels' Wilson one, Δ's their range."""
    for both, only_a, only_b, neither in tables(random.Random(6)):
        tasks, discordant = both + only_a + only_b + neither, only_a + only_b
        if tasks == 0:
            continue
        result = exact_mcnemar(*outcomes(both, only_a, only_b, neither))
        theta = (0.0, 1.0)
        if discordant:
            ci = scipy_stats.binomtest(only_a, discordant).proportion_ci(method="exact")
            theta = (ci.low, ci.high)
        share = proportion_confint(discordant, tasks, alpha=ALPHA, method="wilson")
        corners = [s * (2 * t - 1) for s in share for t in theta]
        assert (result.low, result.high) == pytest.approx((min(corners), max(corners)), abs=1e-9)
        assert result.p == pytest.approx(statsmodels_mcnemar([[both, only_a], [only_b, neither]], exact=True).pvalue)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 10, 29, 30, 99, 500])
def test_student_t_is_scipy_s(df: int) -> None:
    for t in (0.0, 0.2, 1.0, 1.96, 2.3, 3.5, 8.0):
        assert t_two_sided_p(t, df) == pytest.approx(2 * scipy_stats.t.sf(t, df), rel=1e-9, abs=1e-12), t
    assert t_critical(df, ALPHA) == pytest.approx(scipy_stats.t.ppf(1 - ALPHA / 2, df), rel=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_paired_t_is_scipy_s_ttest_rel(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 60)
    a = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in range(n)]
    b = [min(1.0, max(0.0, x - rng.choice([-0.25, 0.0, 0.25, 0.5]))) for x in a]
    if len(set(x - y for x, y in zip(a, b, strict=True))) < 2:
        b[0] = 1.0 - b[0] if b[0] != 0.5 else 0.0  # some spread, or t has nothing to go on
    reference = scipy_stats.ttest_rel(a, b)
    interval = reference.confidence_interval(confidence_level=1 - ALPHA)
    result = paired_t(a, b)
    assert result.p == pytest.approx(reference.pvalue, rel=1e-9, abs=1e-12)
    assert result.low == pytest.approx(max(-1.0, interval.low), abs=1e-9)
    assert result.high == pytest.approx(min(1.0, interval.high), abs=1e-9)
    assert result.significant == (reference.pvalue < ALPHA)
