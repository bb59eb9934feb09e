"""Change points in a nightly series: one figure of one arm on one host, commit by commit.

Each boundary between two measured commits is judged on the runs of the `window` commits either
side: a Mann-Whitney U test (scipy.stats; robust to outlying runs) and the ratio of the two
windows' pooled medians. A boundary is a candidate when that ratio is at least the figure's
threshold and no other boundary within `window` commits differs more (a step straddled by a
window shows there too, smaller). Candidates' p-values over every series of one analysis are
adjusted together (Benjamini-Hochberg), so the false-discovery rate of what is reported stays
at `alpha` however many series there are; the confidence is 1 - the adjusted p.

asv's own step detection (asv.step_detect.detect_steps, the fit its Regressions page draws)
is the second opinion: each step says whether asv's fit has a boundary there and its two
segment values. Without weights it merges a step into a drift beside it (a +25% step after a
+9% drift over ten commits was one segment), so it does not decide; it tells the reader
whether asv's own page will show the step.

A slow drift has no boundary whose windows differ by the threshold, so it is not a step.

Figures that are exact at temperature 0 (byte identity, rejection rate) are judged exactly:
the first commit whose value differs from the commit before is a step, with no statistics.

A series whose noise hides a threshold-sized step even over two windows of runs (see
`detectable`) is listed as unstable and never alerted. Pure functions: the caller reads the
results and the git history.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.analyze.stats import scipy_stats

WINDOW = 5            # measured commits on each side of a boundary for the samples' test
ALPHA = 0.05          # false-discovery rate over all candidates of one analysis


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
    before: float                  # pooled median of the window before (exact: the value)
    after: float
    ratio: float                   # after / before (lower is better: above 1 is a regression)
    p_value: float | None          # Mann-Whitney, unadjusted; None for an exact figure
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
    """The change two windows of `window` commits would show with `power` at `alpha`, from the
    typical spread of one commit's runs (log scale; a normal approximation of the rank test)."""
    sds = [statistics.stdev([math.log(x) for x in p.samples]) for p in points
           if len(p.samples) >= 3 and min(p.samples) > 0]
    if not sds:
        return None
    runs = statistics.median([len(p.samples) for p in points]) * window
    nd = scipy_stats().norm
    q = nd.ppf(1 - alpha / 2) + nd.ppf(power)
    return math.expm1(q * statistics.median(sds) * math.sqrt(2.0 / runs))


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


def candidates(series: str, points: list[Point], order: list[str], threshold: float,
               window: int = WINDOW) -> tuple[list[Step], int]:
    """Every boundary's two windows compared (Mann-Whitney U on their runs, p unadjusted); a
    boundary whose windows differ by the threshold or more, and that differs more than any other
    within `window` commits of it (a step straddled by a window shows there too, smaller)."""
    found, tested = [], 0
    for b in range(1, len(points)):
        left = [x for p in points[max(0, b - window):b] for x in p.samples]
        right = [x for p in points[b:b + window] for x in p.samples]
        if len(left) < 2 or len(right) < 2 or min(left + right) <= 0:
            continue
        tested += 1    # every boundary tested counts in the false-discovery control, big or not
        before, after = statistics.median(left), statistics.median(right)
        if abs(math.log(after / before)) < math.log1p(threshold):
            continue
        p_value = float(scipy_stats().mannwhitneyu(left, right, alternative="two-sided").pvalue)
        found.append((p_value, -abs(math.log(after / before)), b, before, after))
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
    """BH-adjusted p-values (step-up), in the input's order."""
    m = len(pvalues)
    ranked = sorted(range(m), key=lambda i: pvalues[i])
    adj = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = ranked[rank - 1]
        running = min(running, pvalues[i] * m / rank)
        adj[i] = min(1.0, running)
    return adj


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
            res.unstable = (f"the runs' spread hides changes under {det:.0%} over two windows of {window} "
                            f"commits, more than the {t:.0%} threshold")
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
