"""Change points in a nightly series: one figure of one arm on one host, commit by commit.

The unit is the commit, not the run: runs of one nightly session share its conditions, and
sessions differ (on a shared host by more than runs within a session do), so testing runs as
if independent finds steps that are only a slow session (it did: 253 alerts in 30 simulated
weeks of unchanged code). Each boundary between two measured commits is judged on the log
medians of up to `window` measured commits before it against up to `window` after it (at least
MIN_AFTER after: a single new commit waits a night for a second): a pooled two-sample t test,
and the ratio of the two windows' medians. A boundary is a candidate when that ratio is at
least the figure's threshold and no other boundary within `window` commits differs more (a step
straddled by a window shows there too, smaller). The p-values of every boundary of every
series of one analysis are adjusted together (Benjamini-Hochberg; boundaries below the
threshold enter as p = 1), at a false-discovery rate of 5% split over the `window` nights a
boundary is looked at again; the confidence is 1 - the adjusted p.

asv's own step detection (asv.step_detect.detect_steps, the fit its Regressions page draws)
is a second opinion: each step says whether asv's fit has a boundary there and its two segment
values. Without weights it merges a step into a drift beside it (a +25% step after a +9% drift
over ten commits was one segment), so it does not decide.

A slow drift has no boundary whose windows differ by the threshold, so it is not a step.

Figures that are exact at temperature 0 (byte identity, rejection rate) are judged exactly:
the first commit whose value differs from the commit before is a step, with no statistics.

A series whose commits' medians spread so much that two windows hide a threshold-sized step
(`detectable`) is listed as unstable and never alerted. Pure functions: the caller reads the
results and the git history.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.analyze.design import share_text
from harness.analyze.stats import scipy_stats

WINDOW = 5            # measured commits on each side of a boundary
MIN_AFTER = 2         # measured commits after a boundary before a measured figure's step is called
# False-discovery rate of one night's analysis: 5% split over the nights one boundary is looked
# at again as its after-window fills (WINDOW of them), so a week of nights stays near 5%.
ALPHA = 0.05 / WINDOW


@dataclass(frozen=True)
class Point:
    """One measured commit of a series (oldest first)."""
    commit: str
    samples: tuple[float, ...]     # per-run values; a median alone is one sample

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


@dataclass
class Step:
    """A change between two measured commits. `commits` is the range that holds it: every commit
    after `last_before` up to and including `first_after` (unmeasured ones between included)."""
    series: str
    last_before: str
    first_after: str
    commits: list[str]
    before: float                  # median of the window's commit medians (exact: the value)
    after: float
    ratio: float                   # after / before (lower is better: above 1 is a regression)
    p_value: float | None          # t test of the windows' log medians, unadjusted; None for an exact figure
    exact: bool = False
    confidence: float | None = None   # 1 - BH-adjusted p; None for an exact figure
    asv_segments: tuple[float, float] | None = None   # asv's fit: its values either side, if it has a boundary here

    @property
    def direction(self) -> str:
        return "regression" if self.ratio > 1.0 else "improvement"

    @property
    def change(self) -> float:
        return self.ratio - 1.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "direction": self.direction}


@dataclass
class SeriesResult:
    series: str
    points: int
    steps: list[Step] = field(default_factory=list)
    unstable: str | None = None    # why the series cannot show its threshold, or None


def detectable(points: list[Point], alpha: float = ALPHA, window: int = WINDOW, power: float = 0.80) -> float | None:
    """The change two windows of `window` commits would show with `power` at `alpha`, from how
    much one commit's median differs from the next (successive differences, so a step or a
    drift does not count as noise)."""
    logs = [math.log(p.median) for p in points if p.median > 0]
    if len(logs) < 4:
        return None
    diffs = sorted(abs(b - a) for a, b in zip(logs, logs[1:]))
    sd = statistics.median(diffs) / (0.6745 * math.sqrt(2.0))     # MAD of differences -> sd of one point
    df = 2 * window - 2
    t = scipy_stats().t
    q = t.ppf(1 - alpha / 2, df) + t.ppf(power, df)
    return math.expm1(q * sd * math.sqrt(2.0 / window))


def _exact_steps(series: str, points: list[Point], order: list[str]) -> list[Step]:
    out = []
    for prev, cur in zip(points, points[1:]):
        if prev.median != cur.median:
            out.append(Step(series, prev.commit, cur.commit, _between(order, prev.commit, cur.commit),
                            prev.median, cur.median,
                            (cur.median / prev.median) if prev.median else math.inf, None, exact=True))
    return out


def _between(order: list[str], last_before: str, first_after: str) -> list[str]:
    """The commits after last_before up to first_after, in history order."""
    i, j = order.index(last_before), order.index(first_after)
    return order[i + 1:j + 1]


def _pooled_t(left: list[float], right: list[float]) -> float:
    """Two-sided p of a pooled two-sample t test (a side of one point adds no degrees of freedom)."""
    nl, nr = len(left), len(right)
    ml, mr = statistics.fmean(left), statistics.fmean(right)
    ss = sum((x - ml) ** 2 for x in left) + sum((x - mr) ** 2 for x in right)
    df = nl + nr - 2
    if df < 1:
        return 1.0
    sp = math.sqrt(ss / df)
    if sp == 0.0:
        return 0.0 if ml != mr else 1.0
    t = (mr - ml) / (sp * math.sqrt(1.0 / nl + 1.0 / nr))
    return float(2.0 * scipy_stats().t.sf(abs(t), df))


def candidates(series: str, points: list[Point], order: list[str], threshold: float,
               window: int = WINDOW) -> tuple[list[Step], int]:
    """Every boundary judged on the commits either side: the log medians of up to `window`
    measured commits before against those after (a pooled t test; p unadjusted). The commit is
    the unit, not the run: runs of one session share its conditions, and sessions differ. A
    boundary is kept when the windows' medians differ by the threshold or more, and by more than
    at any other boundary within `window` commits (a step a window straddles shows there too)."""
    logs = [math.log(p.median) if p.median > 0 else math.nan for p in points]
    found, tested = [], 0
    for b in range(1, len(points)):
        left, right = logs[max(0, b - window):b], logs[b:b + window]
        if any(math.isnan(x) for x in left + right) or len(left) < 2 or len(right) < MIN_AFTER:
            continue
        tested += 1    # every boundary tested counts in the false-discovery control, big or not
        before, after = math.exp(statistics.median(left)), math.exp(statistics.median(right))
        if abs(math.log(after / before)) < math.log1p(threshold):
            continue
        found.append((_pooled_t(left, right), -abs(math.log(after / before)), b, before, after))
    kept: list[tuple[float, float, int, float, float]] = []
    for c in sorted(found):
        if all(abs(c[2] - k[2]) >= window for k in kept):
            kept.append(c)
    asv_bounds = _asv_boundaries(points)
    out = []
    for p_value, _, b, before, after in sorted(kept, key=lambda c: c[2]):
        last, first = points[b - 1].commit, points[b].commit
        near = [x for x in asv_bounds if abs(x[0] - b) <= 1]
        out.append(Step(series, last, first, _between(order, last, first), before, after, after / before,
                        p_value, asv_segments=near[0][1] if near else None))
    return out, tested


def _asv_boundaries(points: list[Point]) -> list[tuple[int, tuple[float, float]]]:
    """asv's piecewise-constant fit of the medians: (first point after a boundary, its two values)."""
    from asv.step_detect import detect_steps

    segs = detect_steps([p.median for p in points]) if len(points) > 1 else []
    return [(s1[0], (s0[2], s1[2])) for s0, s1 in zip(segs, segs[1:])]


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """BH-adjusted p-values (step-up), in the input's order: scipy.stats.false_discovery_control."""
    if not pvalues:
        return []
    return [float(p) for p in scipy_stats().false_discovery_control(list(pvalues), method="bh")]


def analyze_series(all_series: dict[str, list[Point]], order: list[str], threshold: dict[str, float] | float,
                   exact: set[str] | None = None, alpha: float = ALPHA, window: int = WINDOW) -> list[SeriesResult]:
    """Steps of every series, the false-discovery rate controlled over all of them together.
    `order`: the branch's commits oldest first; `threshold`: one, or per series."""
    exact = exact or set()
    results: dict[str, SeriesResult] = {}
    pending: list[Step] = []
    tested = 0
    for name, points in all_series.items():
        t = threshold if isinstance(threshold, float) else threshold.get(name, 0.10)
        res = SeriesResult(name, len(points))
        results[name] = res
        if name in exact:
            res.steps = _exact_steps(name, points, order)
            continue
        det = detectable(points, alpha, window)
        if det is not None and det > t:
            res.unstable = (f"its commits' medians spread so that two windows of {window} commits hide "
                            f"changes under {det:.1%}, more than the {share_text(t)} threshold")
            continue
        found, n = candidates(name, points, order, t, window)
        pending += found
        tested += n
    # Untested-for-size boundaries enter BH as p = 1: they count in m without being discoveries.
    pvals = [s.p_value or 1.0 for s in pending] + [1.0] * max(0, tested - len(pending))
    for step, adj in zip(pending, benjamini_hochberg(pvals)):
        if adj <= alpha:
            step.confidence = 1.0 - adj
            results[step.series].steps.append(step)
    return list(results.values())
