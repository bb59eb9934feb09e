"""Paired comparison: two sides measured run by run, judged on the ratio within each pair.

Two sides (a base and a head commit, or an arm and its classic reference) run adjacent in
time, so a slow drift of the machine lands on both runs of a pair, and the ratio head/base of
one pair carries little of it. Each figure is judged on those ratios:

- a location of the per-pair log ratios with a two-sided t interval whose standard error allows
  for serial correlation between successive pairs (serial_inflation; never narrower than the
  independent-pairs one): a worker process that stays slow for a few pairs makes neighbouring
  pairs alike, and an interval that ignores it is too narrow. From MIN_ROBUST_PAIRS pairs the
  location is Huber's M-estimate (huber_location): the host disturbs a few runs much more than
  the rest, and those weigh little; the geometric mean then guards the tails on TAIL_SHARE of
  the level, so a change that slows only some runs is still "worse". Fewer pairs: the geometric
  mean alone;
- the smallest detectable change: the true change this check catches with `power` (80%)
  at its false-alarm level, i.e. max(q_alpha * se, log(1 + floor)) + q_power * se on the
  log scale. It is a statement about the data, not a half-width of a no-change interval;
- a verdict: "worse"/"improved" when the interval excludes no change AND the change is at
  least the floor (threshold / 2 by default: two worker processes or two machine states can
  differ by a percent or two, and a change that small is not what a check is for);
  "unchanged" when the interval lies inside +-threshold and the check could have seen a
  change of the threshold; "inconclusive" otherwise, with the smallest detectable change.

The false-alarm level is spent over the looks of a sequential check (harness.analyze.spending:
an O'Brien-Fleming-type alpha-spending boundary at each look's time and sample size) and split
over the figures that gate the check, so repeated looks at a growing sample and many figures keep
the family-wise false-alarm rate at or below `alpha` (docs/statistics.md). Pure functions;
nothing here runs or reads anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from harness.analyze.spending import nominal_level
from harness.analyze.stats import scipy_stats

VERDICTS = ("worse", "improved", "unchanged", "inconclusive")


@dataclass(frozen=True)
class Design:
    """What one check promises: the change it must see, and its false-alarm level."""

    threshold: float = 0.10   # relative change the check must be able to see (0.10 = 10%)
    alpha: float = 0.05       # family-wise false-alarm level of the whole check
    looks: int = 4            # at most this many looks at a growing sample; alpha spent over them
    figures: int = 1          # figures that gate the check; alpha split over them too
    power: float = 0.80       # probability of catching a change of the detectable size
    floor: float | None = None  # smallest change ever called worse/improved (default threshold/2)
    # Benjamini-Hochberg over the gated figures (judge_family): a figure BH selects out of R is
    # judged, and its interval drawn, at the level of R figures' share of alpha (false-coverage-
    # rate intervals).
    selected: int = 1
    # Which look this judgement is (1-based; None: the last of `looks`).
    look: int | None = None
    # When each look up to this one was taken, for the boundary (harness.analyze.spending): the
    # share of the budget spent (1.0 at the last look: it spends what is left) and the rounds
    # complete. Empty: looks planned evenly, the j-th at j / looks of the budget and of the rounds.
    times: tuple[float, ...] = ()
    sizes: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold!r}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if self.looks < 1 or self.figures < 1:
            raise ValueError(f"looks and figures must be >= 1, got {self.looks}, {self.figures}")
        if not 0.5 <= self.power < 1.0:
            raise ValueError(f"power must be in [0.5, 1), got {self.power!r}")
        if self.look is not None and not 1 <= self.look <= self.looks:
            raise ValueError(f"look must be in [1, {self.looks}], got {self.look!r}")
        if self.times and (len(self.times) != len(self.sizes) or len(self.times) != (self.look or self.looks)):
            raise ValueError(f"times and sizes must give every look up to look {self.look or self.looks}, "
                             f"got {len(self.times)} and {len(self.sizes)}")

    def at_looks(self, times: Sequence[float], sizes: Sequence[float]) -> Design:
        """This design at the look taken last of looks taken at `times` with `sizes` (see above)."""
        return replace(self, look=len(times), times=tuple(times), sizes=tuple(sizes))

    def level(self, a: float) -> float:
        """The two-sided nominal level this look tests at, for a check whose level over all its
        looks is `a`: `a` itself with one look, else the spending boundary's (spending.py)."""
        if self.looks == 1:
            return a
        times, sizes = self.times, self.sizes
        if not times:
            j = self.look or self.looks
            times = tuple(1.0 if i == self.looks else i / self.looks for i in range(1, j + 1))
            sizes = tuple(float(i) for i in range(1, j + 1))
        return nominal_level(a, times, sizes)

    @property
    def look_share(self) -> float:
        """This look's nominal level as a share of one figure's level (display: the looks' shares
        sum to more than 1, as looks at overlapping data may)."""
        a = self.alpha / self.figures
        return self.level(a) / a

    @property
    def alpha_per_test(self) -> float:
        return self.level(self.alpha * self.selected / self.figures)

    @property
    def min_effect(self) -> float:
        return self.threshold / 2.0 if self.floor is None else self.floor

    @classmethod
    def for_settings(cls, settings: object, figures: int) -> Design:
        """A suite's design: its threshold and alpha, split over its looks only when a budget
        makes looks repeated, and over the compared figures."""
        s = settings
        return cls(threshold=s.threshold, alpha=s.alpha,  # type: ignore[attr-defined]
                   looks=s.looks if s.budget_s else 1, figures=max(1, figures))  # type: ignore[attr-defined]

    def to_dict(self) -> dict:
        return {**asdict(self), "look_share": self.look_share, "alpha_per_test": self.alpha_per_test,
                "min_effect": self.min_effect}


@dataclass(frozen=True)
class Paired:
    """One figure's paired reading. Ratios are head / base (lower is better for timings)."""

    n: int                         # pairs used
    ratio: float | None            # geometric mean of the per-pair ratios
    lo: float | None               # confidence interval at 1 - alpha_per_test
    hi: float | None
    detectable: float | None       # smallest relative change caught with the design's power
    verdict: str                   # worse | improved | unchanged | inconclusive
    note: str = ""
    sd_log: float | None = None    # standard deviation of the per-pair log ratios
    # The standard error of the mean log ratio is sd_log / sqrt(n) x inflation: the factor (>= 1)
    # by which the pairs' serial correlation widens it (1.0 in records written before 2026-12-05);
    # unless the interval rests on the worker generations (`generations["used"]`, then `df` is set).
    inflation: float = 1.0
    autocorr: float | None = None  # lag-1 autocorrelation of the series the interval rests on
    # What `ratio` is: "mean" (the geometric mean of the per-pair ratios: any check of fewer than
    # MIN_ROBUST_PAIRS pairs, and every record written before the Huber location, late on
    # 2026-12-05) or "huber" (a robust location of the per-pair log ratios: a few pairs the host
    # disturbed weigh little).
    location: str = "mean"
    mean_ratio: float | None = None  # the geometric mean of the per-pair ratios, always (of the
                                     # adjusted ones when the dispatch probe was used)
    spread: float | None = None    # per-pair spread the interval rests on (sd_log, or the Huber
                                   # influence values' sd), before the serial inflation
    # The dispatch probe as a covariate (adjust_for_probe), when the pairs had one: None without.
    dispatch_probe: dict | None = None
    # The pairs' worker generations (suite `restart_s`; _generations): how many, the test of
    # whether they differ, and whether the interval rests on them. None: one worker per side
    # for the whole check (every record before 2026-12-06).
    generations: dict | None = None
    df: int | None = None          # the interval's degrees of freedom (None: n - 1)
    # The threshold the verdict was judged against (None in records written before the stopping
    # rule asked a decided figure for its size too, 2026-12-06).
    threshold: float | None = None

    @property
    def resolved(self) -> bool:
        """Needs no more data: unchanged (so the check could see the threshold), or worse or
        improved with a smallest detectable change within the threshold. A change is caught
        before its size is known ("+14.6% (+0.4% to +30.7%)"), and sampling goes on until the
        interval says how big it is to within the threshold, or the budget is spent."""
        if self.verdict == "unchanged":
            return True
        if self.verdict not in ("worse", "improved"):
            return False
        return self.threshold is None or (self.detectable is not None and self.detectable <= self.threshold)

    def to_dict(self) -> dict:
        return asdict(self)


def _quantiles(df: int, design: Design, share: float = 1.0) -> tuple[float, float]:
    """(q_a, q_b): the two-sided t quantile at `share` of the design's per-test level, and the
    power quantile, at df degrees of freedom."""
    q_a = float(scipy_stats().t.ppf(1.0 - share * design.alpha_per_test / 2.0, df))
    q_b = float(scipy_stats().t.ppf(design.power, df))
    return q_a, q_b


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
      decays. scripts/serial_level.py measures the pair from 20 pairs: 5.0-9.0% for a nominal 5% at rho 0.25-0.4
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


def detectable_change(spread: float, n: int, design: Design, share: float = 1.0) -> float:
    """The true relative change a check of n pairs with this per-pair spread catches with the
    design's power at `share` of its per-test level: exp(max(q_a se, log(1 + floor)) + q_b se) - 1,
    se = spread / sqrt(n) (pass spread x inflation for serially correlated pairs)."""
    if n < 2:
        return math.inf
    return _detectable(spread / math.sqrt(n), n - 1, design, share)


def _detectable(se: float, df: int, design: Design, share: float = 1.0) -> float:
    q_a, q_b = _quantiles(df, design, share)
    x = max(q_a * se, math.log1p(design.min_effect)) + q_b * se
    return math.expm1(x) if x < 700.0 else math.inf


def _exp(x: float) -> float:
    """exp, inf past float range: an interval on one or two degrees of freedom at a small level
    can reach that far (two worker generations at an early look)."""
    return math.exp(x) if x < 700.0 else math.inf


def pairs_needed(spread: float, design: Design, share: float = 1.0, limit: int = 100_000) -> int | None:
    """Fewest pairs whose detectable change at this per-pair spread (x inflation) is at most the
    threshold, None past `limit`: a check's plan (scripts/pair_noise.py, scripts/rejudge_pairs.py).
    The detectable change shrinks as n grows, so a bisection finds the first n."""
    if detectable_change(spread, limit, design, share) > design.threshold:
        return None
    lo, hi = 2, limit
    while lo < hi:
        mid = (lo + hi) // 2
        if detectable_change(spread, mid, design, share) <= design.threshold:
            hi = mid
        else:
            lo = mid + 1
    return lo


def plan(p: Paired, design: Design) -> int | None:
    """Pairs a check like p (its spread, serial allowance and location) needs to see the threshold."""
    if p.spread is None:
        return None
    return pairs_needed(p.spread * p.inflation, design, 1.0 - TAIL_SHARE if p.location == "huber" else 1.0)


# From this many pairs the typical pair is judged on a robust location (huber_location) and the
# geometric mean only guards the tails, with TAIL_SHARE of the figure's false-alarm level: fewer
# pairs cannot estimate the scale a robust location needs (nor the serial correlation).
MIN_ROBUST_PAIRS = MIN_SERIAL_PAIRS
TAIL_SHARE = 0.1
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


# The dispatch probe (harness.collect.host.probe) is a covariate: the same fixed work on both
# sides, timed right after each run, so its pair log ratio x follows the host's state in that
# moment and not the code. The pairs' log ratios d are then judged as d - theta x, theta the
# Huber regression slope of d on x: the part of each pair's ratio the host's state predicts is
# taken out, and E[x] = 0 leaves the center unbiased. Robust like the location judged after it:
# a least-squares slope follows the few pairs the host disturbed (where run and probe were both
# slow) and then adds the probe's own noise to every other pair; on the CPU host that made the
# typical pair's spread wider, not narrower (docs/statistics.md). From MIN_PROBE_PAIRS pairs
# (theta needs them; the Huber location starts there too), and only while the probe's own ratio
# is no change at the figure's level: a probe that moved means the code, or one side's process,
# slows work the engine does not do, and the pairs are then judged as they are.
MIN_PROBE_PAIRS = MIN_ROBUST_PAIRS


def _huber_weights(z: np.ndarray) -> np.ndarray:
    u = np.abs(z)
    return np.where(u <= HUBER_C, 1.0, HUBER_C / np.maximum(u, 1e-300))


def huber_slope(d: np.ndarray, x: np.ndarray) -> float:
    """The slope of a Mallows-type robust regression of d on x (with an intercept): Huber weights
    on the residuals, and on x itself, so that neither a pair far off the line nor a pair with an
    extreme probe reading sets it (a disturbance that slowed a run and its probe alike lies on a
    steep line of its own). Iteratively reweighted least squares from the least-squares fit,
    scales 1.4826 x MAD (the residuals' at each step)."""
    X = np.column_stack([np.ones_like(x), x])
    sx = 1.4826 * float(np.median(np.abs(x - np.median(x))))
    wx = _huber_weights((x - np.median(x)) / sx) if sx > 0.0 else np.ones_like(x)
    beta = np.linalg.lstsq(X, d, rcond=None)[0]
    for _ in range(100):
        r = d - X @ beta
        s = 1.4826 * float(np.median(np.abs(r - np.median(r))))
        if s <= 0.0:
            break
        w = np.sqrt(_huber_weights(r / s) * wx)
        new = np.linalg.lstsq(X * w[:, None], d * w, rcond=None)[0]
        done = float(np.max(np.abs(new - beta))) < 1e-12
        beta = new
        if done:
            break
    return float(beta[1])


def adjust_for_probe(logs: np.ndarray, x: np.ndarray, design: Design) -> tuple[np.ndarray, float, dict]:
    """(the log ratios to judge, the factor that widens their spread, what the probe did).

    The factor allows for theta being estimated: the residual variance over n - 2 degrees of
    freedom, and the variance theta's error adds to the mean through the probe's own mean
    (a regression's standard error at x = 0: s^2 (1/n + mean(x)^2 / Sxx))."""
    n = int(logs.size)
    info: dict = {"n": n, "probe_ratio": math.exp(float(x.mean())) if n else None, "used": False}
    if n < MIN_PROBE_PAIRS:
        info["why"] = f"fewer than {MIN_PROBE_PAIRS} pairs"
        return logs, 1.0, info
    xc = x - x.mean()
    sxx = float(xc @ xc)
    if sxx <= 0.0 or float(logs.std()) == 0.0:
        info["why"] = "the probe or the figure did not vary"
        return logs, 1.0, info
    infl, _ = serial_inflation(x)
    se_x = math.sqrt(sxx / (n - 1)) * infl / math.sqrt(n)
    p_x = float(2.0 * scipy_stats().t.sf(abs(float(x.mean())) / se_x, n - 1))
    info["probe_p"] = p_x
    # The figure's own level before any Benjamini-Hochberg selection, so that the p-value and
    # the verdict of one figure make the same choice.
    if p_x < replace(design, selected=1).alpha_per_test:
        info["why"] = "the probe itself moved"
        return logs, 1.0, info
    theta = huber_slope(logs, x)
    widen = math.sqrt((n - 1) / (n - 2) * (1.0 + n * float(x.mean()) ** 2 / sxx))
    info.update(used=True, theta=theta, corr=float(np.corrcoef(logs, x)[0, 1]), widen=widen)
    return logs - theta * x, widen, info


def probe_note(info: dict | None) -> str | None:
    """One clause for a verdict's note: what the probe did, or why it was not used."""
    if not info or info.get("probe_ratio") is None:
        return None
    if info.get("used"):
        took = (f"{info['variance_removed']:.0%} of their variance taken out" if info["variance_removed"] >= 0.005
                else "none of their variance taken out")
        return f"adjusted for the dispatch probe (correlation {info['corr']:+.2f} with the pairs' ratios, {took})"
    if info.get("why") == "the probe itself moved":
        return (f"not adjusted for the dispatch probe: the probe itself moved {info['probe_ratio'] - 1.0:+.1%} "
                f"between the sides (the code, or one side's process, slows work the engine does not do)")
    return None


# Worker generations (suite `restart_s`): a check may restart both sides' worker processes during
# its sampling, so every pair belongs to one generation, one pair of processes. A per-process
# effect (two processes of the same code that run at different speeds for their whole life: on a
# lent H100 the dispatch probe's fixed work ran 29-39% apart between two workers in 3 of 5 checks,
# docs/asv.md) is then constant within a generation and varies between generations; successive
# pairs cannot see it, however many there are. The judged reading tests whether its generations
# differ (one-way analysis of variance of the values it rests on, F test at GENERATIONS_PRETEST),
# and the tails' guard takes its answer; where they do, the standard error is the cluster-robust
# one over generations (never narrower than the pairs' own), on G - 1 degrees of freedom. Where
# they do not, the pairs' own (the "sometimes pool" rule of Bozivich, Bancroft and Hartley, 1956,
# who recommend a pretest at 0.25: pooling then costs a little level at small effects, and a check
# without a per-process effect keeps most of its power); scripts/generations_level.py measures both.
GENERATIONS_PRETEST = 0.25


def _generations(values: np.ndarray, blocks: np.ndarray | None, se: float, inflation: float = 1.0,
                 decided: dict | None = None) -> tuple[float, int | None, dict | None]:
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
    info: dict = {"count": g, "used": False}
    if g < 2 or n - g < 1:
        return se, None, info
    sizes = np.bincount(idx)
    grand = float(values.mean())
    means = np.bincount(idx, weights=values) / sizes
    msb = float(sizes @ (means - grand) ** 2) / (g - 1)
    msw = float(((values - means[idx]) ** 2).sum()) / (n - g)
    p = (float(scipy_stats().f.sf(msb / msw / inflation ** 2, g - 1, n - g)) if msw > 0.0
         else (0.0 if msb > 0.0 else 1.0))
    info["p"] = p
    if not (decided["used"] if decided is not None else p < GENERATIONS_PRETEST):
        return se, None, info
    dev = np.bincount(idx, weights=values - grand)
    between = math.sqrt(g / (g - 1.0) * float(dev @ dev)) / n
    info.update(used=True, se_ratio=between / se if se > 0.0 else None)
    return max(se, between), g - 1, info


@dataclass(frozen=True)
class _Reading:
    """One location estimate of the per-pair log ratios and its standard error."""

    center: float
    se: float
    spread: float
    inflation: float
    autocorr: float | None
    df: int                        # of the standard error: n - 1, or generations - 1
    generations: dict | None = None

    @property
    def on_generations(self) -> bool:
        """The standard error is the generations' (they differ), not the pairs'."""
        return bool(self.generations and self.generations["used"])


def _readings(logs: np.ndarray, widen: float, gens: np.ndarray | None) -> tuple[_Reading, _Reading | None]:
    """(the mean's reading, the robust one or None): the tails' guard (the mean) takes the judged
    (robust) reading's answer on the generations."""
    robust = _robust_reading(logs, widen, gens)
    return _mean_reading(logs, widen, gens, robust.generations if robust else None), robust


def _mean_reading(logs: np.ndarray, widen: float = 1.0, blocks: np.ndarray | None = None,
                  decided: dict | None = None) -> _Reading:
    sd = float(logs.std(ddof=1)) * widen
    infl, r1 = serial_inflation(logs)
    se, df, gens = _generations(logs * widen, blocks, sd * infl / math.sqrt(logs.size), infl, decided)
    return _Reading(float(logs.mean()), se, sd, infl, r1, logs.size - 1 if df is None else df, gens)


def _robust_reading(logs: np.ndarray, widen: float = 1.0, blocks: np.ndarray | None = None) -> _Reading | None:
    if logs.size < MIN_ROBUST_PAIRS:
        return None
    h = huber_location(logs)
    if h is None:
        return None
    mu, influence = h
    spread = float(influence.std(ddof=1)) * widen
    infl, r1 = serial_inflation(influence)
    se, df, gens = _generations(influence * widen, blocks, spread * infl / math.sqrt(logs.size), infl)
    return _Reading(mu, se, spread, infl, r1, logs.size - 1 if df is None else df, gens)


def _arrays(base: Sequence[float], head: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    b = np.asarray(base, dtype=float)
    h = np.asarray(head, dtype=float)
    if b.shape != h.shape or b.ndim != 1:
        raise ValueError(f"base and head must be paired sequences of one length, got {b.shape} and {h.shape}")
    return b, h


Blocks = Sequence[object] | None   # each pair's worker generation (any hashable label), or None


def _logs(base: Sequence[float], head: Sequence[float], probe: tuple[Sequence[float], Sequence[float]] | None,
          design: Design, blocks: Blocks = None) -> tuple[np.ndarray, float, dict | None, np.ndarray, np.ndarray | None]:
    """The usable pairs' log ratios (head / base), adjusted for the probe when it has one for each
    pair: (logs, widen, what the probe did, the same pairs' unadjusted log ratios, their
    generations or None)."""
    b, h = _arrays(base, head)
    keep = np.isfinite(b) & np.isfinite(h) & (b > 0) & (h > 0)
    gens = None
    if blocks is not None:
        gens = np.asarray([str(x) for x in blocks])
        if gens.shape != b.shape:
            raise ValueError(f"the pairs' generations must match the figure's, got {gens.shape} for {b.shape}")
    if probe is None:
        logs = np.log(h[keep] / b[keep])
        return logs, 1.0, None, logs, None if gens is None else gens[keep]
    pb, ph = np.asarray(probe[0], dtype=float), np.asarray(probe[1], dtype=float)
    if pb.shape != b.shape or ph.shape != b.shape:
        raise ValueError(f"the probe's pairs must match the figure's, got {pb.shape} and {ph.shape} for {b.shape}")
    keep &= np.isfinite(pb) & np.isfinite(ph) & (pb > 0) & (ph > 0)
    raw = np.log(h[keep] / b[keep])
    logs, widen, info = adjust_for_probe(raw, np.log(ph[keep] / pb[keep]), design)
    return logs, widen, info, raw, None if gens is None else gens[keep]


def _removed(with_: _Reading, robust: bool, raw: np.ndarray, logs: np.ndarray, widen: float) -> float:
    """What the probe took out of the judged spread: 1 - (spread with it / without it)^2, both of
    the reading analyze() judges (the means' when the unadjusted pairs have no robust one)."""
    without = _robust_reading(raw) if robust else None
    if without is None:
        with_, without = _mean_reading(logs, widen), _mean_reading(raw)
    return 1.0 - (with_.spread / without.spread) ** 2 if without.spread > 0 else 0.0


def analyze(base: Sequence[float], head: Sequence[float], design: Design,
            probe: tuple[Sequence[float], Sequence[float]] | None = None, blocks: Blocks = None) -> Paired:
    """Judge head against base, pair by pair (base[i] and head[i] ran next to each other).
    probe: the dispatch probe's (base, head) times of the same pairs, a covariate
    (adjust_for_probe). blocks: each pair's worker generation (_generations), or None."""
    b, h = _arrays(base, head)
    keep = np.isfinite(b) & np.isfinite(h)
    n = int(keep.sum())
    if n == 0:
        return Paired(0, None, None, None, None, "inconclusive", "no pairs")
    if np.any(b[keep] <= 0) or np.any(h[keep] <= 0):
        return Paired(n, None, None, None, None, "inconclusive", "non-positive values: no ratio to judge")
    logs, widen, probe_info, raw, gens = _logs(base, head, probe, design, blocks)
    n = int(logs.size)
    if n == 0:
        return Paired(0, None, None, None, None, "inconclusive", "no pairs with a probe reading")
    mean_ratio = math.exp(float(logs.mean()))
    if n < 2:
        return Paired(n, mean_ratio, None, None, None, "inconclusive", "one pair: its spread is unknown",
                      mean_ratio=mean_ratio, dispatch_probe=probe_info)
    mean, robust = _readings(logs, widen, gens)
    # The judged reading spends the figure's level, or (robust) all of it but the tails' share.
    main, share = (robust, 1.0 - TAIL_SHARE) if robust else (mean, 1.0)
    if probe_info and probe_info["used"]:
        probe_info["variance_removed"] = _removed(main, robust is not None, raw, logs, widen)
    q_a, _ = _quantiles(main.df, design, share)
    ratio = math.exp(main.center)
    lo, hi = _exp(main.center - q_a * main.se), _exp(main.center + q_a * main.se)
    det = _detectable(main.se, main.df, design, share)
    t, floor = design.threshold, design.min_effect
    big = abs(main.center) >= math.log1p(floor)
    inside = lo >= 1.0 - t and hi <= 1.0 + t
    notes = []
    # The tails' guard: a change that slows only a few runs moves the mean, not the typical pair.
    tail = None
    if robust:
        q_m, _ = _quantiles(mean.df, design, TAIL_SHARE)
        m_lo, m_hi = _exp(mean.center - q_m * mean.se), _exp(mean.center + q_m * mean.se)
        if (m_lo > 1.0 or m_hi < 1.0) and abs(mean.center) >= math.log1p(floor):
            tail = "worse" if m_lo > 1.0 else "improved"
    if lo > 1.0 and big:
        verdict = "worse"
    elif hi < 1.0 and big:
        verdict = "improved"
    elif tail:
        verdict = tail
        notes.append(f"the typical pair reads {ratio - 1.0:+.1%}, but the mean of the pairs reads "
                     f"{mean_ratio - 1.0:+.1%} ({m_lo - 1.0:+.1%} to {m_hi - 1.0:+.1%}): some runs changed much more")
    elif inside and det <= t:
        verdict = "unchanged"
        if lo > 1.0 or hi < 1.0:
            notes.append(f"a significant {ratio - 1.0:+.1%}, below the {share_text(floor)} floor")
    else:
        verdict = "inconclusive"
        notes.append(f"the interval reaches beyond ±{share_text(t)}" if det <= t
                     else f"smallest detectable change {det:.1%}, above the {share_text(t)} threshold" if math.isfinite(det)
                     else "no change is detectable from these pairs")
    if robust and not tail and abs(mean.center - main.center) >= math.log1p(floor) / 2.0:
        notes.append(f"the mean of the pairs reads {mean_ratio - 1.0:+.1%}")   # shown, not judged alone
    if main.inflation >= 1.1 and not main.on_generations:   # why the interval is wider than the spread makes it
        notes.append(f"successive pairs alike (lag-1 autocorrelation {main.autocorr:+.2f}): "
                     f"interval {main.inflation:.2f}x the independent-pairs one")
    if (said := probe_note(probe_info)) is not None:
        notes.append(said)
    if (said := generations_note(main.generations)) is not None:
        notes.append(said)
    return Paired(n, ratio, lo, hi, det, verdict, "; ".join(notes), mean.spread, main.inflation, main.autocorr,
                  "huber" if robust else "mean", mean_ratio, main.spread, probe_info, main.generations,
                  main.df if main.on_generations else None, t)


def generations_note(info: dict | None) -> str | None:
    """One clause for a verdict's note when the pairs' worker generations differed."""
    if not info or not info.get("used"):
        return None
    df = info["count"] - 1
    return (f"the pairs' {info['count']} worker generations differ (p = {info['p']:.2g}): the interval rests "
            f"on the generations, {df} degree{'s' if df > 1 else ''} of freedom (a per-process effect)")


def _p(reading: _Reading) -> float:
    if reading.se == 0.0:
        return 0.0 if reading.center != 0.0 else 1.0
    return float(2.0 * scipy_stats().t.sf(abs(reading.center) / reading.se, reading.df))


def p_value(base: Sequence[float], head: Sequence[float], design: Design = Design(),
            probe: tuple[Sequence[float], Sequence[float]] | None = None, blocks: Blocks = None) -> float:
    """Two-sided p-value against no change with analyze()'s readings: the mean's t test, or from
    MIN_ROBUST_PAIRS pairs the smaller of the robust location's and the tails' guard's p-values,
    each over its share of the level (Bonferroni); 1.0 without two usable pairs or spread. With a
    probe, on the adjusted ratios (whether to adjust is decided at the design's level)."""
    logs, widen, _, _, gens = _logs(base, head, probe, design, blocks)
    if logs.size < 2 or float(logs.std(ddof=1)) == 0.0:
        return 1.0
    mean, robust = _readings(logs, widen, gens)
    if robust is None:
        return _p(mean)
    return min(1.0, _p(robust) / (1.0 - TAIL_SHARE), _p(mean) / TAIL_SHARE)


def judge_family(pairs: Sequence[tuple[Sequence[float], Sequence[float]]], design: Design,
                 probes: Sequence[tuple[Sequence[float], Sequence[float]] | None] | None = None,
                 blocks: Sequence[Blocks] | None = None) -> list[Paired]:
    """The gated figures of one check, judged together: Benjamini-Hochberg over their p-values,
    its k-th critical value this look's level for k of the m figures' share of alpha (k alpha / m
    with one look), selects R of them; a selected figure is judged at R figures' level (its
    interval then excludes no change: a false-coverage-rate interval), the others at one
    figure's. With every figure unchanged this is the family-wise level.
    probes: each figure's dispatch-probe pairs, or None; blocks: each figure's pairs' worker
    generations, or None (analyze)."""
    m = len(pairs)
    if m == 0:
        return []
    design = replace(design, figures=m, selected=1)
    probes = list(probes) if probes is not None else [None] * m
    blocks = list(blocks) if blocks is not None else [None] * m
    ps = [p_value(b, h, design, pr, bl) for (b, h), pr, bl in zip(pairs, probes, blocks)]
    ranked = sorted(range(m), key=lambda i: ps[i])
    r = max((k + 1 for k, i in enumerate(ranked) if ps[i] <= replace(design, selected=k + 1).alpha_per_test),
            default=0)
    chosen = set(ranked[:r])
    return [analyze(b, h, replace(design, selected=r) if i in chosen else design, probes[i], blocks[i])
            for i, (b, h) in enumerate(pairs)]


def ratio_text(p: Paired) -> str:
    """'+3.1% (+0.4% to +5.9%)', or '-' when there is no ratio."""
    if p.ratio is None:
        return "-"
    if p.lo is None or p.hi is None:
        return f"{p.ratio - 1.0:+.1%}"
    return f"{p.ratio - 1.0:+.1%} ({p.lo - 1.0:+.1%} to {p.hi - 1.0:+.1%})"


def share_text(x: float) -> str:
    """A threshold or floor as a percentage with no digit lost or invented: 0.02 -> '2%',
    0.025 -> '2.5%' (a fixed '.0%' would print both as '2%')."""
    return f"{100.0 * x:.4g}%"


def detectable_text(p: Paired) -> str:
    return "-" if p.detectable is None or not math.isfinite(p.detectable) else f"{p.detectable:.1%}"
