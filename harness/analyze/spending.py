"""Group-sequential boundaries: how much of a check's false-alarm level each look may spend.

A check with a time budget looks at its growing sample up to `looks` times and may stop at any
of them. Judging every look at the full level would raise the false-alarm rate with each look;
splitting the level evenly (Bonferroni) keeps it, but treats looks at overlapping data as if they
were independent and leaves the last look, where a check that needs its whole budget is
decided, with a fraction of the level.

Lan and DeMets' alpha spending does better (Lan & DeMets 1983, Biometrika 70:659): by time t of
the budget (0 < t <= 1) the check may have spent alpha(t) of its level, and each look's boundary
is the one at which the chance of crossing there, and at no look before, is the increment
alpha(t_j) - alpha(t_{j-1}), computed from the looks' real sample sizes (the statistic at look i
and look j correlate as sqrt(n_i / n_j)). The chance of any false alarm over all looks is then
alpha, exactly for normal statistics, whenever the looks came and whatever they saw, so long as
the times are not chosen from the data. The last look spends all that is left (t = 1).

The spending function is the O'Brien-Fleming type, in the form gsDesign's sfLDOF uses for a
symmetric two-sided test (each side spends 2 - 2 Phi(z_{alpha/4} / sqrt(t)) of alpha / 2): it
spends almost nothing early, so a check that runs to its budget is judged near the one-look
level. Four equally spaced looks at alpha 5% give 4.333, 2.963, 2.359 and 2.014 (the published
values; tests/test_spending.py), against 2.64 at each early look and 2.24 at the last with
the even-split Bonferroni rule used before 2026-12-06: the last look needs
((2.014 + 0.84) / (2.24 + 0.84))^2 = 0.86 of the pairs for the same detectable change.

The crossing probabilities are integrated numerically on a grid (Armitage, McPherson & Rowe's
recursion; Jennison & Turnbull 2000, ch. 19): deterministic, so a verdict is the same every time
it is computed. Pure functions.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from harness.analyze.stats import scipy_stats

GRID = 401       # points per look (odd: Simpson's rule); the level is exact to about 1e-6
Z_MAX = 10.0     # the grid's reach where a look spends nothing (no boundary)


def spent(alpha: float, t: float) -> float:
    """The share of the two-sided level `alpha` spent by time t of the budget (O'Brien-Fleming
    type, gsDesign's sfLDOF per side): 4 - 4 Phi(z_{alpha/4} / sqrt(t)); alpha at t >= 1."""
    if t >= 1.0:
        return alpha
    if t <= 0.0:
        return 0.0
    norm = scipy_stats().norm
    return float(4.0 * norm.sf(norm.isf(alpha / 4.0) / math.sqrt(t)))


def boundaries(alpha: float, times: Sequence[float], sizes: Sequence[float]) -> tuple[float, ...]:
    """The two-sided boundaries c_1..c_j (|z| >= c_j at look j is a crossing) for looks at spending
    times `times` (increasing, in (0, 1]; 1 at the last look) with sample sizes `sizes` (pairs or
    rounds: only their ratios count). A look that spends nothing has an infinite boundary; a look
    at no more data than the one before keeps that look's boundary (it sees the same statistic)."""
    if len(times) != len(sizes) or not times:
        raise ValueError(f"times and sizes must be non-empty and as long, got {len(times)} and {len(sizes)}")
    if any(b <= a for a, b in zip(times, times[1:])) or not 0.0 < times[0] or times[-1] > 1.0:
        raise ValueError(f"times must increase within (0, 1], got {tuple(times)}")
    if any(s <= 0 for s in sizes):
        raise ValueError(f"sizes must be positive, got {tuple(sizes)}")
    return _boundaries(float(alpha), tuple(float(t) for t in times), tuple(float(s) for s in sizes))


@functools.lru_cache(maxsize=4096)
def _boundaries(alpha: float, times: tuple[float, ...], sizes: tuple[float, ...]) -> tuple[float, ...]:
    from scipy.optimize import brentq

    norm = scipy_stats().norm
    out: list[float] = []
    before = 0.0                     # alpha spent up to the previous look
    # The mass that has not crossed by the previous look: scores S = z sqrt(n) on a grid, and the
    # mass at each point (none before the first look).
    s, w = np.zeros(0), np.zeros(0)
    n_prev = 0.0
    for t, n in zip(times, sizes):
        if out and n <= n_prev:      # the same data again: the same statistic, nothing new to spend
            out.append(out[-1])
            continue
        increment = spent(alpha, t) - before
        sd = math.sqrt(n - n_prev)   # the score's step since the previous look
        if increment <= 0.0:
            c = math.inf
        elif not out:
            c = float(norm.isf(increment / 2.0))
        else:
            c = float(brentq(_excess_crossing, 0.0, 40.0, args=(s, w, math.sqrt(n), sd, increment), xtol=1e-10))
        reach = min(c, Z_MAX)
        z = np.linspace(-reach, reach, GRID)
        simpson = np.ones(GRID)
        simpson[1:-1:2], simpson[2:-1:2] = 4.0, 2.0
        simpson *= (z[1] - z[0]) / 3.0
        s_new = z * math.sqrt(n)
        density = (norm.pdf(z) if not out else
                   (w[None, :] * norm.pdf((s_new[:, None] - s[None, :]) / sd)).sum(axis=1) * math.sqrt(n) / sd)
        s, w = s_new, density * simpson
        before, n_prev = spent(alpha, t), n
        out.append(c)
    return tuple(out)


def _excess_crossing(c: float, s: np.ndarray, w: np.ndarray, root_n: float, sd: float, target: float) -> float:
    """The chance of crossing boundary c at this look and at no look before (the grid's mass w
    at scores s moves by a normal step of sd), less the target."""
    norm = scipy_stats().norm
    b = c * root_n
    return float(w @ (norm.cdf((-b - s) / sd) + norm.sf((b - s) / sd))) - target


def nominal_level(alpha: float, times: Sequence[float], sizes: Sequence[float]) -> float:
    """The two-sided level of the last look's boundary alone: 2 (1 - Phi(c_j)). A normal
    statistic at that look is a crossing when its p-value is below it; 0.0 for a look that
    spends nothing."""
    c = boundaries(alpha, times, sizes)[-1]
    return 0.0 if math.isinf(c) else float(2.0 * scipy_stats().norm.sf(c))
