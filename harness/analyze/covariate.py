"""The dispatch measurement as a covariate of a paired check's per-pair log ratios.

adjust_for_probe takes out of each pair's log ratio the part the host's state predicts (the
probe's own pair log ratio times a robust slope, huber_slope), while the probe itself did not
move; probe_note says what it did in a verdict's note. harness.analyze.paired judges the
adjusted ratios; docs/statistics.md ("The dispatch measurement") says why. Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import msgspec
import numpy as np

from harness.analyze.design import Design
from harness.analyze.estimators import HUBER_C, MIN_ROBUST_PAIRS, serial_inflation
from harness.analyze.stats import scipy_stats

# The dispatch measurement (harness.collect.host.dispatch) is a covariate: the same fixed work on both
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
PROBE_MOVED = "the probe itself moved"


class ProbeInfo(msgspec.Struct, kw_only=True):
    """What the probe did for one figure's pairs, as a verdict keeps it (`Paired.dispatch_measurement`,
    its builtins: a field never set is left out, in this order)."""
    n: int                                         # the pairs with a probe reading
    probe_ratio: float | None                      # the probe's geometric mean ratio, head / base
    used: bool                                     # the pairs were adjusted for it
    probe_p: float | msgspec.UnsetType = msgspec.UNSET   # the probe's own change's p-value
    why: str | msgspec.UnsetType = msgspec.UNSET         # why it was not used
    theta: float | msgspec.UnsetType = msgspec.UNSET     # the slope taken out
    corr: float | msgspec.UnsetType = msgspec.UNSET      # the pairs' ratios against the probe's
    widen: float | msgspec.UnsetType = msgspec.UNSET     # the spread's factor for theta's error
    variance_removed: float | msgspec.UnsetType = msgspec.UNSET   # share of the judged spread taken out


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


def adjust_for_probe(logs: np.ndarray, x: np.ndarray, design: Design) -> tuple[np.ndarray, float, ProbeInfo]:
    """(the log ratios to judge, the factor that widens their spread, what the probe did).

    The factor allows for theta being estimated: the residual variance over n - 2 degrees of
    freedom, and the variance theta's error adds to the mean through the probe's own mean
    (a regression's standard error at x = 0: s^2 (1/n + mean(x)^2 / Sxx))."""
    n = int(logs.size)
    info = ProbeInfo(n=n, probe_ratio=math.exp(float(x.mean())) if n else None, used=False)
    if n < MIN_PROBE_PAIRS:
        info.why = f"fewer than {MIN_PROBE_PAIRS} pairs"
        return logs, 1.0, info
    xc = x - x.mean()
    sxx = float(xc @ xc)
    if sxx <= 0.0 or float(logs.std()) == 0.0:
        info.why = "the probe or the figure did not vary"
        return logs, 1.0, info
    infl, _ = serial_inflation(x)
    se_x = math.sqrt(sxx / (n - 1)) * infl / math.sqrt(n)
    p_x = float(2.0 * scipy_stats().t.sf(abs(float(x.mean())) / se_x, n - 1))
    info.probe_p = p_x
    # The figure's own level before any Benjamini-Hochberg selection, so that the p-value and
    # the verdict of one figure make the same choice.
    if p_x < replace(design, selected=1).alpha_per_test:
        info.why = PROBE_MOVED
        return logs, 1.0, info
    theta = huber_slope(logs, x)
    widen = math.sqrt((n - 1) / (n - 2) * (1.0 + n * float(x.mean()) ** 2 / sxx))
    info.used, info.theta, info.corr, info.widen = True, theta, float(np.corrcoef(logs, x)[0, 1]), widen
    return logs - theta * x, widen, info


def probe_note(info: ProbeInfo | Mapping[str, Any] | None) -> str | None:
    """One clause for a verdict's note: what the probe did, or why it was not used (info: the
    adjustment's, or as a verdict in a record keeps it)."""
    if not info:
        return None
    p = info if isinstance(info, ProbeInfo) else msgspec.convert(info, ProbeInfo)
    if p.probe_ratio is None:
        return None
    if p.used:
        removed = p.variance_removed
        took = (f"{removed:.0%} of their variance taken out"
                if isinstance(removed, float) and removed >= 0.005 else "none of their variance taken out")
        return f"adjusted for the dispatch measurement (correlation {p.corr:+.2f} with the pairs' ratios, {took})"
    if p.why == PROBE_MOVED:
        return (f"not adjusted for the dispatch measurement: the probe itself moved {p.probe_ratio - 1.0:+.1%} "
                f"between the sides (the code, or one side's process, slows work the engine does not do)")
    return None
