"""Statistics for benchmark samples: location, spread, intervals, tests and verdicts.

Pure functions on plain sequences of numbers. Bad input (empty sample, n=0, NaN, a
non-positive median where a ratio is taken) raises ValueError naming the argument.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Sequence
from types import ModuleType

import numpy as np

__all__ = [
    "median",
    "min_max",
    "spread",
    "wilson_ci",
    "bootstrap_ratio_ci",
    "mann_whitney_u",
    "mann_whitney_method",
    "sign_test",
    "verdict",
    "scipy_stats",
]


@functools.cache
def scipy_stats() -> ModuleType:
    """scipy.stats, imported on first use: it takes about a second, which every command paid at
    start-up (one-line errors and --help included) although most never compute a test."""
    return importlib.import_module("scipy.stats")

# Mann-Whitney with ties: enumerate every split exactly while there are at most this many.
_EXACT_PERMUTATION_LIMIT = 20_000


def _sample(xs: Sequence[float] | np.ndarray, name: str = "xs") -> np.ndarray:
    """The sample as a 1-D float array; ValueError if empty, not 1-D, or not finite."""
    try:
        arr = np.asarray(xs, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected a sequence of numbers ({exc})") from None
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a flat sequence of numbers, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name}: empty sample (need at least one value)")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: sample contains NaN or infinity")
    return arr


def _level(level: float) -> float:
    if not (isinstance(level, (int, float)) and 0.0 < level < 1.0):
        raise ValueError(f"level: must be strictly between 0 and 1, got {level!r}")
    return float(level)


def median(xs: Sequence[float]) -> float:
    """Sample median of xs (mean of the two middle values when len(xs) is even)."""
    return float(np.median(_sample(xs)))


def min_max(xs: Sequence[float]) -> tuple[float, float]:
    """(smallest, largest) value of xs."""
    arr = _sample(xs)
    return float(arr.min()), float(arr.max())


def spread(xs: Sequence[float]) -> float:
    """Relative range of xs: (max - min) / median. ValueError if the median is not positive."""
    arr = _sample(xs)
    med = float(np.median(arr))
    if med <= 0.0:
        raise ValueError(f"xs: spread needs a positive median, got {med!r}")
    return float(arr.max() - arr.min()) / med


def wilson_ci(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval (no continuity correction) for the proportion k/n at `level`, from
    scipy.stats.binomtest(k, n).proportion_ci(method="wilson"); (0, hi) at k=0, (lo, 1) at k=n."""
    if isinstance(k, bool) or isinstance(n, bool) or int(k) != k or int(n) != n:
        raise ValueError(f"wilson_ci: k and n must be integers, got k={k!r}, n={n!r}")
    k, n = int(k), int(n)
    if n <= 0:
        raise ValueError(f"wilson_ci: n must be positive, got n={n}")
    if not 0 <= k <= n:
        raise ValueError(f"wilson_ci: need 0 <= k <= n, got k={k}, n={n}")
    ci = scipy_stats().binomtest(k, n).proportion_ci(confidence_level=_level(level), method="wilson")
    # k=0 and k=n give exactly 0 and 1 on paper; keep float rounding from crossing them.
    lo = 0.0 if k == 0 else max(0.0, float(ci.low))
    hi = 1.0 if k == n else min(1.0, float(ci.high))
    return lo, hi


def bootstrap_ratio_ci(
    a: Sequence[float],
    b: Sequence[float],
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(median(a)/median(b), lo, hi): percentile bootstrap CI of the ratio of medians from
    scipy.stats.bootstrap, each side resampled independently n_boot times with numpy
    default_rng(seed); lo/hi at (1 -/+ level)/2."""
    arr_a = _sample(a, "a")
    arr_b = _sample(b, "b")
    lvl = _level(level)
    if isinstance(n_boot, bool) or int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"n_boot: must be a positive integer, got {n_boot!r}")
    med_a, med_b = float(np.median(arr_a)), float(np.median(arr_b))
    if med_b <= 0.0 or med_a < 0.0:
        raise ValueError(
            f"bootstrap_ratio_ci: needs positive medians, got median(a)={med_a!r}, median(b)={med_b!r}"
        )
    if np.any(arr_b <= 0.0):
        # A resampled median of b could be <= 0 and the ratio would be meaningless.
        raise ValueError("b: every value must be positive for a ratio of medians")
    # scipy resamples only sides of two or more values; a one-value side's median is that value
    # in every resample (and drawing from one value takes nothing from the generator).
    resampled = tuple(x for x in (arr_a, arr_b) if x.size > 1)
    if not resampled:
        return med_a / med_b, med_a / med_b, med_a / med_b

    def ratio(*xs: np.ndarray, axis: int = -1) -> np.ndarray | float:
        sides = iter(xs)
        top = np.median(next(sides), axis=axis) if arr_a.size > 1 else med_a
        return top / (np.median(next(sides), axis=axis) if arr_b.size > 1 else med_b)

    ci = scipy_stats().bootstrap(resampled, ratio, n_resamples=int(n_boot), confidence_level=lvl,
                                 method="percentile", vectorized=True,
                                 random_state=np.random.default_rng(seed)).confidence_interval
    return med_a / med_b, float(ci.low), float(ci.high)


def mann_whitney_method(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> str:
    """p-value method mann_whitney_u uses: "exact" (no ties, min(len) <= 8), "permutation" (ties,
    at most 20,000 splits, all enumerated) or "asymptotic" (tie-corrected normal) otherwise."""
    arr_a, arr_b = _sample(a, "a"), _sample(b, "b")
    pooled = np.concatenate([arr_a, arr_b])
    ties = np.unique(pooled).size < pooled.size
    if not ties and min(arr_a.size, arr_b.size) <= 8:
        return "exact"
    if ties and math.comb(pooled.size, arr_a.size) <= _EXACT_PERMUTATION_LIMIT:
        return "permutation"
    return "asymptotic"


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(U, two-sided p) from scipy.stats.mannwhitneyu(a, b); U = #(a_i > b_j) + #ties/2. p is exact
    for small samples (exact U law, or every split when tied), else normal: see mann_whitney_method."""
    arr_a, arr_b = _sample(a, "a"), _sample(b, "b")
    method = mann_whitney_method(arr_a, arr_b)
    if method == "permutation":
        scipy_method: object = scipy_stats().PermutationMethod(n_resamples=np.inf)
    else:
        scipy_method = method
    res = scipy_stats().mannwhitneyu(arr_a, arr_b, alternative="two-sided", method=scipy_method)
    return float(res.statistic), min(1.0, float(res.pvalue))


def sign_test(n_pos: int, n_neg: int) -> float:
    """Two-sided exact binomial sign-test p for n_pos vs n_neg (ties dropped beforehand):
    scipy.stats.binomtest(n_pos, n_pos + n_neg, 0.5).pvalue."""
    for name, v in (("n_pos", n_pos), ("n_neg", n_neg)):
        if isinstance(v, bool) or int(v) != v or v < 0:
            raise ValueError(f"sign_test: {name} must be a non-negative integer, got {v!r}")
    n = int(n_pos) + int(n_neg)
    if n == 0:
        raise ValueError("sign_test: no untied pairs (n_pos + n_neg = 0)")
    return float(scipy_stats().binomtest(int(n_pos), n, 0.5, alternative="two-sided").pvalue)


def verdict(ratio_lo: float, ratio_hi: float, threshold: float) -> str:
    """Lower-is-better new/old ratio CI [lo, hi] vs threshold t (equivalence-region rule): "improved" if
    hi < 1-t, "worse" if lo > 1+t, "unchanged" if inside [1-t, 1+t], else "inconclusive"."""
    for name, v in (("ratio_lo", ratio_lo), ("ratio_hi", ratio_hi), ("threshold", threshold)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"verdict: {name} must be a finite number, got {v!r}")
    if ratio_lo <= 0.0:
        raise ValueError(f"verdict: ratio_lo must be positive, got {ratio_lo!r}")
    if ratio_lo > ratio_hi:
        raise ValueError(f"verdict: ratio_lo ({ratio_lo!r}) > ratio_hi ({ratio_hi!r})")
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"verdict: threshold must be in (0, 1), got {threshold!r}")
    if ratio_hi < 1.0 - threshold:
        return "improved"
    if ratio_lo > 1.0 + threshold:
        return "worse"
    if ratio_lo >= 1.0 - threshold and ratio_hi <= 1.0 + threshold:
        return "unchanged"
    return "inconclusive"

