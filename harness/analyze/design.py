"""What a paired check promises, and the arithmetic of its thresholds.

`Design` holds a check's threshold, false-alarm level and power. The false-alarm level is spent
over the looks of a sequential check (harness.analyze.spending: an O'Brien-Fleming-type
alpha-spending boundary at each look's time and sample size) and split over the figures that
gate the check, so repeated looks at a growing sample and many figures keep the family-wise
false-alarm rate at or below `alpha` (docs/statistics.md).

The smallest detectable change is the true change a check catches with `power` (80%) at its
false-alarm level, i.e. max(q_alpha * se, log(1 + floor)) + q_power * se on the log scale: a
statement about the data, not a half-width of a no-change interval. pairs_needed inverts it.
The verdict that uses them is harness.analyze.paired's. Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from harness.analyze.spending import nominal_level
from harness.analyze.stats import scipy_stats


@dataclass(frozen=True)
class Design:
    """What one check promises: the change it must see, and its false-alarm level."""

    threshold: float = 0.10   # relative change the check must be able to see (0.10 = 10%)
    alpha: float = 0.05       # family-wise false-alarm level of the whole check
    looks: int = 4            # at most this many looks at a growing sample; alpha spent over them
    figures: int = 1          # figures that gate the check; alpha split over them too
    power: float = 0.80       # probability of catching a change of the detectable size
    floor: float | None = None  # smallest change ever called worse/improved (default threshold/2)
    # Benjamini-Hochberg over the gated figures (paired.judge_family): a figure BH selects out
    # of R is judged, and its interval drawn, at the level of R figures' share of alpha (false-
    # coverage-rate intervals).
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

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "look_share": self.look_share, "alpha_per_test": self.alpha_per_test,
                "min_effect": self.min_effect}


def quantiles(df: int, design: Design, share: float = 1.0) -> tuple[float, float]:
    """(q_a, q_b): the two-sided t quantile at `share` of the design's per-test level, and the
    power quantile, at df degrees of freedom."""
    q_a = float(scipy_stats().t.ppf(1.0 - share * design.alpha_per_test / 2.0, df))
    q_b = float(scipy_stats().t.ppf(design.power, df))
    return q_a, q_b


def detectable_change(spread: float, n: int, design: Design, share: float = 1.0) -> float:
    """The true relative change a check of n pairs with this per-pair spread catches with the
    design's power at `share` of its per-test level: exp(max(q_a se, log(1 + floor)) + q_b se) - 1,
    se = spread / sqrt(n) (pass spread x inflation for serially correlated pairs)."""
    if n < 2:
        return math.inf
    return detectable_at(spread / math.sqrt(n), n - 1, design, share)


def detectable_at(se: float, df: int, design: Design, share: float = 1.0) -> float:
    """detectable_change for a standard error `se` on `df` degrees of freedom (a reading's own,
    e.g. one that rests on worker generations)."""
    q_a, q_b = quantiles(df, design, share)
    x = max(q_a * se, math.log1p(design.min_effect)) + q_b * se
    return math.expm1(x) if x < 700.0 else math.inf


def pairs_needed(spread: float, design: Design, share: float = 1.0, limit: int = 100_000) -> int | None:
    """Fewest pairs whose detectable change at this per-pair spread (x inflation) is at most the
    threshold, None past `limit`: a check's plan (scripts/studies/pair_noise.py, scripts/studies/rejudge_pairs.py).
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


def share_text(x: float) -> str:
    """A threshold or floor as a percentage with no digit lost or invented: 0.02 -> '2%',
    0.025 -> '2.5%' (a fixed '.0%' would print both as '2%')."""
    return f"{100.0 * x:.4g}%"
