"""harness.analyze.stats against values computed by hand, from textbook examples, or by brute force."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest

from harness.analyze import stats

# --- location and spread -------------------------------------------------------------------

def test_median_odd_and_even():
    assert stats.median([5.0, 1.0, 3.0]) == 3.0
    assert stats.median([4, 1, 3, 2]) == 2.5
    assert isinstance(stats.median([1, 2, 3]), float)


def test_min_max():
    assert stats.min_max([3.0, -1.0, 7.5, 2.0]) == (-1.0, 7.5)


def test_spread_is_range_over_median():
    # (12 - 9) / 10 = 0.3
    assert stats.spread([10.0, 9.0, 12.0, 10.0, 11.0]) == pytest.approx(0.3)
    assert stats.spread([4.0, 4.0, 4.0]) == 0.0


@pytest.mark.parametrize("fn", [stats.median, stats.min_max, stats.spread])
def test_empty_and_nan_raise(fn):
    with pytest.raises(ValueError, match="empty"):
        fn([])
    with pytest.raises(ValueError, match="NaN"):
        fn([1.0, float("nan")])


def test_spread_needs_positive_median():
    with pytest.raises(ValueError, match="median"):
        stats.spread([-1.0, 0.0, 1.0])


# --- Wilson score interval -----------------------------------------------------------------

def test_wilson_8_of_10_by_hand():
    # z = 1.959964, z^2 = 3.841459; denom = 1.3841459; centre = (0.8 + 0.1920729)/denom = 0.716741;
    # half = z*sqrt(0.016 + 0.0096036)/denom = 0.226583  ->  (0.490158, 0.943324)
    lo, hi = stats.wilson_ci(8, 10)
    assert lo == pytest.approx(0.490158, abs=1e-5)
    assert hi == pytest.approx(0.943324, abs=1e-5)


def test_wilson_edges_and_level():
    # k = 0: lower bound 0, upper z^2/(n + z^2) = 3.841459/13.841459 = 0.277533
    lo, hi = stats.wilson_ci(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.277533, abs=1e-5)
    lo, hi = stats.wilson_ci(10, 10)
    assert hi == 1.0 and lo == pytest.approx(1 - 0.277533, abs=1e-5)
    # A higher level gives a wider interval around the same centre.
    lo90, hi90 = stats.wilson_ci(8, 10, level=0.90)
    lo99, hi99 = stats.wilson_ci(8, 10, level=0.99)
    assert lo99 < lo90 and hi90 < hi99


def test_wilson_on_seed_acceptance_is_not_the_seeds_wald_interval():
    # The seed reports p = 0.7145 over 1734 trials with "[0.6933, 0.7358]": that is the Wald
    # interval (0.71453 +/- 1.96*sqrt(p(1-p)/n)). Wilson, which this module gives, is shifted
    # toward 1/2: (0.69282, 0.73530) (scipy.stats.binomtest(1239, 1734).proportion_ci('wilson')).
    lo, hi = stats.wilson_ci(1239, 1734)
    assert lo == pytest.approx(0.692819, abs=1e-5)
    assert hi == pytest.approx(0.735298, abs=1e-5)
    p = 1239 / 1734
    wald_half = 1.959964 * math.sqrt(p * (1 - p) / 1734)
    assert round(p - wald_half, 4) == 0.6933 and round(p + wald_half, 4) == 0.7358


@pytest.mark.parametrize("k,n", [(0, 0), (1, 0), (-1, 5), (6, 5), (1.5, 4)])
def test_wilson_bad_input(k, n):
    with pytest.raises(ValueError):
        stats.wilson_ci(k, n)


def test_wilson_bad_level():
    with pytest.raises(ValueError, match="level"):
        stats.wilson_ci(1, 2, level=1.0)


# --- sign test ------------------------------------------------------------------------------

def test_sign_test_9_vs_1():
    # 2 * (C(10,0) + C(10,1)) / 2^10 = 22/1024
    assert stats.sign_test(9, 1) == 0.021484375
    assert stats.sign_test(1, 9) == 0.021484375


def test_sign_test_balanced_and_seed():
    assert stats.sign_test(5, 5) == 1.0
    # Seed: of 59 rounds whose accept count differs, 27 vs 32, "Sign test p = 0.603".
    assert round(stats.sign_test(27, 32), 3) == 0.603
    # 0 vs 3: 2 * (1/8) = 0.25
    assert stats.sign_test(0, 3) == 0.25


def test_sign_test_bad_input():
    with pytest.raises(ValueError, match="no untied"):
        stats.sign_test(0, 0)
    with pytest.raises(ValueError):
        stats.sign_test(-1, 3)


# --- Mann-Whitney U -------------------------------------------------------------------------

def _enumerated_p(a, b):
    """Two-sided p by enumerating every split of the pooled sample (reference, small n only)."""
    pooled = list(a) + list(b)

    def u_of(xs, ys):
        return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in xs for y in ys)

    centre = len(a) * len(b) / 2.0
    observed = abs(u_of(a, b) - centre)
    hits = total = 0
    for idx in combinations(range(len(pooled)), len(a)):
        xs = [pooled[i] for i in idx]
        ys = [pooled[i] for i in range(len(pooled)) if i not in idx]
        total += 1
        hits += abs(u_of(xs, ys) - centre) >= observed - 1e-12
    return hits / total


def test_mann_whitney_complete_separation():
    # U = 0; only 1 of C(6,3) = 20 splits is that extreme on each side: p = 2/20.
    u, p = stats.mann_whitney_u([1, 2, 3], [4, 5, 6])
    assert u == 0.0 and p == pytest.approx(0.1)
    # 5 vs 5: p = 2 / C(10,5) = 2/252, which is why asv's 5-vs-5 cannot reach p < 0.002.
    u, p = stats.mann_whitney_u([6, 7, 8, 9, 10], [1, 2, 3, 4, 5])
    assert u == 25.0 and p == pytest.approx(2 / 252)


def test_mann_whitney_interleaved_by_hand():
    # a = 1,3,5 vs b = 2,4,6: pairs a > b are (3,2), (5,2), (5,4): U = 3. The null law of U for
    # 3 vs 3 has counts 1,1,2,3,3,3,3,2,1,1 over U = 0..9, so P(U <= 3) = 7/20, p = 0.7.
    u, p = stats.mann_whitney_u([1, 3, 5], [2, 4, 6])
    assert u == 3.0 and p == pytest.approx(0.7)
    assert stats.mann_whitney_method([1, 3, 5], [2, 4, 6]) == "exact"


def test_mann_whitney_ties_are_exact_by_enumeration():
    a, b = [1, 2, 2, 5], [2, 4, 6, 6]
    # U: 1 beats nothing; each 2 ties the 2 (0.5 each); 5 beats 2 and 4: U = 3.
    assert stats.mann_whitney_method(a, b) == "permutation"
    u, p = stats.mann_whitney_u(a, b)
    assert u == 3.0
    assert p == pytest.approx(_enumerated_p(a, b))  # 14/70 = 0.2
    assert p == pytest.approx(0.2)


def test_mann_whitney_large_uses_normal_and_detects_shift():
    rng = np.random.default_rng(1)
    a = rng.normal(10.0, 1.0, 40)
    b = rng.normal(12.0, 1.0, 40)
    assert stats.mann_whitney_method(a, b) == "asymptotic"
    u, p = stats.mann_whitney_u(a, b)
    assert 0 <= u <= 1600 and p < 1e-6


def test_mann_whitney_empty_raises():
    with pytest.raises(ValueError, match="a: empty"):
        stats.mann_whitney_u([], [1.0])


# --- bootstrap CI of a ratio of medians -----------------------------------------------------

def test_bootstrap_constant_samples():
    assert stats.bootstrap_ratio_ci([2.0, 2.0, 2.0], [1.0, 1.0]) == (2.0, 2.0, 2.0)


def test_bootstrap_three_values_by_hand():
    # median of 3 draws from {1,2,3}: P(1) = P(3) = 7/27 = 0.259 > 0.025, so the 2.5% and 97.5%
    # percentiles are exactly 1 and 3; b is constant 1.
    ratio, lo, hi = stats.bootstrap_ratio_ci([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    assert (ratio, lo, hi) == (2.0, 1.0, 3.0)


def test_bootstrap_is_seeded_and_covers_the_true_ratio():
    rng = np.random.default_rng(7)
    b = rng.lognormal(mean=0.0, sigma=0.1, size=60) * 30.0
    a = rng.lognormal(mean=0.0, sigma=0.1, size=60) * 45.0  # true ratio of medians 1.5
    r1 = stats.bootstrap_ratio_ci(a, b, seed=3)
    r2 = stats.bootstrap_ratio_ci(a, b, seed=3)
    assert r1 == r2
    ratio, lo, hi = r1
    assert ratio == pytest.approx(np.median(a) / np.median(b))
    assert lo < 1.5 < hi and lo < ratio < hi
    assert hi - lo < 0.2  # 10% noise, 60 samples a side: the CI is tight
    _, lo90, hi90 = stats.bootstrap_ratio_ci(a, b, level=0.90, seed=3)
    assert lo <= lo90 and hi90 <= hi


def test_bootstrap_bad_input():
    with pytest.raises(ValueError, match="b: empty"):
        stats.bootstrap_ratio_ci([1.0], [])
    with pytest.raises(ValueError, match="positive"):
        stats.bootstrap_ratio_ci([1.0, 2.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="n_boot"):
        stats.bootstrap_ratio_ci([1.0], [1.0], n_boot=0)


# --- verdict --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "lo,hi,expected",
    [
        (0.80, 0.90, "improved"),      # whole CI below 1 - 0.05
        (1.10, 1.30, "worse"),         # whole CI above 1 + 0.05
        (0.98, 1.03, "unchanged"),     # inside [0.95, 1.05]
        (0.95, 1.05, "unchanged"),     # edges count as inside
        (0.90, 1.10, "inconclusive"),  # wider than the threshold allows: never "unchanged"
        (0.92, 0.97, "inconclusive"),  # below 1 but not clearly past the threshold
        (1.03, 1.12, "inconclusive"),
    ],
)
def test_verdict(lo, hi, expected):
    assert stats.verdict(lo, hi, 0.05) == expected


def test_verdict_wide_ci_is_never_unchanged():
    # Centred on 1 but 2t + epsilon wide.
    assert stats.verdict(1 - 0.051, 1 + 0.051, 0.05) == "inconclusive"


@pytest.mark.parametrize("lo,hi,t", [(1.1, 1.0, 0.05), (0.9, 1.1, 0.0), (0.0, 1.0, 0.05), (float("nan"), 1.0, 0.05)])
def test_verdict_bad_input(lo, hi, t):
    with pytest.raises(ValueError):
        stats.verdict(lo, hi, t)
