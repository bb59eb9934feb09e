"""Estimators of the per-pair log ratios that a paired verdict's standard error rests on.

- serial_inflation: how much successive pairs' serial correlation widens the standard error;
- huber_location: Huber's M-estimate of location and each pair's influence value, so that a
  few runs the host disturbed weigh little;
- generations: whether the pairs' worker generations (suite `restart_s`) differ, and then the
  standard error over generations.
harness.analyze.paired combines them into a verdict; docs/statistics.md says why each is there.
Pure functions.
"""

from __future__ import annotations

import math

import msgspec
import numpy as np

from harness.analyze.stats import scipy_stats

# Below this many pairs the lag-1 autocorrelation's own noise (sd about 1 / sqrt(n), 0.22 at 20)
# exceeds the correlations seen (0.19-0.25), and estimating it from 5 pairs inflated a report's
# smallest detectable change from 17.9% to 60.8%: fewer pairs are taken as independent.
MIN_SERIAL_PAIRS = 20


def serial_inflation(logs: np.ndarray) -> tuple[float, float | None]:
    """(inflation, lag-1 autocorrelation) of a series of per-pair log ratios.

    Successive pairs are not independent when a state outlives a pair (one worker's thread on a
    slower core for a few seconds): on a lent H100 the lag-1 autocorrelation of A/A pairs was
    0.19-0.25 in every check, so the plain standard error was about 20% too small and an A/A check
    read "worse" (docs/statistics.md). The inflation is the larger of two estimates of
    sqrt(long-run variance / plain variance), and never below 1 (an interval is never narrower
    than the independent-pairs one):
    - Newey-West (Bartlett kernel, automatic lag floor(4 (n / 100)^(2/9))), which sees any
      short memory but alone still over-rejects at these n (8% for 5% at rho 0.25, n 60);
    - AR(1), sqrt((1 + r) / (1 - r)), r the lag-1 autocorrelation with the Marriott-Pope bias
      correction r + (1 + 3 r) / n, which holds the level better at small n for a state that
      decays. scripts/studies/serial_level.py measures the pair from 20 pairs: 5.0-9.0% for a nominal 5% at rho 0.25-0.4
      against 12-22% for the independent-pairs interval.
    Under MIN_SERIAL_PAIRS pairs the inflation is 1 (the autocorrelation is still returned)."""
    n = int(logs.size)
    x = logs - logs.mean()
    g0 = float(x @ x) / n if n else 0.0
    if n < 3 or g0 == 0.0:
        return 1.0, None
    lag = int(4.0 * (n / 100.0) ** (2.0 / 9.0))   # 2 at n = 20, 5 at n = 400
    gammas = [float(x[:-k] @ x[k:]) / n for k in range(1, lag + 1)]
    r1 = gammas[0] / g0
    if n < MIN_SERIAL_PAIRS:
        return 1.0, r1
    long_run = g0 + 2.0 * sum((1.0 - k / (lag + 1.0)) * g for k, g in enumerate(gammas, start=1))
    r = min(0.9, max(0.0, r1 + (1.0 + 3.0 * r1) / n))
    return max(1.0, math.sqrt(max(long_run, 0.0) / g0), math.sqrt((1.0 + r) / (1.0 - r))), r1


# From this many pairs the typical pair is judged on a robust location (huber_location; the
# tails' guard: harness.analyze.paired.TAIL_SHARE): fewer pairs cannot estimate the scale a
# robust location needs (nor the serial correlation).
MIN_ROBUST_PAIRS = MIN_SERIAL_PAIRS
HUBER_C = 1.345   # 95% of the mean's efficiency when the log ratios are normal


def huber_location(logs: np.ndarray) -> tuple[float, np.ndarray] | None:
    """Huber's M-estimate of location of the per-pair log ratios (scale: 1.4826 x MAD, fixed),
    and each pair's influence value s psi((d_i - mu) / s) / mean(psi'): the estimate moves by
    about the mean of those, so their long-run variance over n is its variance (a sandwich
    estimator; serial_inflation applies to them as to the logs). None when half the pairs or
    more are equal (no scale).

    Why: the host disturbs some runs much more than others. On a lent H100 two checks' log
    ratios had kurtosis 5.5-6.7 and a MAD-based spread half their sd; the Huber location needs
    150 and 169 pairs where the mean needs 387 and 467 for a 2% detectable change, and 2% more
    (848 against 830) where the ratios were near normal (docs/statistics.md)."""
    mu = float(np.median(logs))
    s = 1.4826 * float(np.median(np.abs(logs - mu)))
    if s <= 0.0:
        return None
    for _ in range(100):
        step = s * float(np.clip((logs - mu) / s, -HUBER_C, HUBER_C).mean())
        mu += step
        if abs(step) < 1e-12:
            break
    r = (logs - mu) / s
    slope = float((np.abs(r) <= HUBER_C).mean())
    return mu, s * np.clip(r, -HUBER_C, HUBER_C) / slope


# Worker generations (suite `restart_s`): a check may restart both sides' worker processes during
# its sampling, so every pair belongs to one generation, one pair of processes. A per-process
# effect (two processes of the same code that run at different speeds for their whole life: on a
# lent H100 the dispatch measurement's fixed work ran 29-39% apart between two workers in 3 of 5 checks,
# docs/measurements/log.md) is then constant within a generation and varies between generations; successive
# pairs cannot see it, however many there are. The judged reading tests whether its generations
# differ (one-way analysis of variance of the values it rests on, F test at GENERATIONS_PRETEST),
# and the tails' guard takes its answer; where they do, the standard error is the cluster-robust
# one over generations (never narrower than the pairs' own), on G - 1 degrees of freedom. Where
# they do not, the pairs' own (the "sometimes pool" rule of Bozivich, Bancroft and Hartley, 1956,
# who recommend a pretest at 0.25: pooling then costs a little level at small effects, and a check
# without a per-process effect keeps most of its power); scripts/studies/generations_level.py measures both.
GENERATIONS_PRETEST = 0.25


class GenerationsInfo(msgspec.Struct, kw_only=True):
    """What the pairs' worker generations said, as a verdict keeps it (`Paired.generations`, its
    builtins: a field never set is left out, in this order)."""
    count: int                                     # the generations
    used: bool                                     # the interval rests on them
    p: float | msgspec.UnsetType = msgspec.UNSET   # the F test's p-value (unset: too few to test)
    se_ratio: float | None | msgspec.UnsetType = msgspec.UNSET   # their standard error over the pairs'


def generations(values: np.ndarray, blocks: np.ndarray | None, se: float, inflation: float = 1.0,
                decided: GenerationsInfo | None = None) -> tuple[float, int | None, GenerationsInfo | None]:
    """(standard error, degrees of freedom or None for the pairs' n - 1, what the generations
    said) for a location whose per-pair values (log ratios or influence values) are `values`,
    each pair's generation `blocks`, and whose standard error from the pairs alone is `se`.
    inflation: the pairs' serial inflation (serial_inflation): successive pairs alike make the
    generations' means differ by more than independent pairs would, so the F ratio is divided by
    its square; the test then asks for a difference beyond what the interval already allows.
    decided: another reading's answer for the same pairs (the judged reading's, for the tails'
    guard), taken instead of a test of its own, so that one figure's two readings never
    disagree on whether its generations differ."""
    if blocks is None:
        return se, None, None
    labels, idx = np.unique(blocks, return_inverse=True)
    g, n = int(labels.size), int(values.size)
    info = GenerationsInfo(count=g, used=False)
    if g < 2 or n - g < 1:
        return se, None, info
    sizes = np.bincount(idx)
    grand = float(values.mean())
    means = np.bincount(idx, weights=values) / sizes
    msb = float(sizes @ (means - grand) ** 2) / (g - 1)
    msw = float(((values - means[idx]) ** 2).sum()) / (n - g)
    p = (float(scipy_stats().f.sf(msb / msw / inflation ** 2, g - 1, n - g)) if msw > 0.0
         else (0.0 if msb > 0.0 else 1.0))
    info.p = p
    if not (decided.used if decided is not None else p < GENERATIONS_PRETEST):
        return se, None, info
    dev = np.bincount(idx, weights=values - grand)
    between = math.sqrt(g / (g - 1.0) * float(dev @ dev)) / n
    info.used, info.se_ratio = True, between / se if se > 0.0 else None
    return max(se, between), g - 1, info


def generations_note(info: GenerationsInfo | None) -> str | None:
    """One clause for a verdict's note when the pairs' worker generations differed."""
    if info is None or not info.used:
        return None
    df = info.count - 1
    return (f"the pairs' {info.count} worker generations differ (p = {info.p:.2g}): the interval rests "
            f"on the generations, {df} degree{'s' if df > 1 else ''} of freedom (a per-process effect)")
