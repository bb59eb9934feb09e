"""Paired comparison: two sides measured run by run, judged on the ratio within each pair.

Two sides (a base and a head commit, or an arm and its classic reference) run adjacent in
time, so a slow drift of the machine lands on both runs of a pair, and the ratio head/base of
one pair carries little of it. Each figure is judged on those ratios:

- a location of the per-pair log ratios with a two-sided t interval whose standard error allows
  for serial correlation between successive pairs (estimators.serial_inflation; never narrower
  than the independent-pairs one): a worker process that stays slow for a few pairs makes
  neighbouring pairs alike, and an interval that ignores it is too narrow. From
  MIN_ROBUST_PAIRS pairs the location is Huber's M-estimate (estimators.huber_location): the
  host disturbs a few runs much more than the rest, and those weigh little; the geometric mean
  then guards the tails on TAIL_SHARE of the level, so a change that slows only some runs is
  still "worse". Fewer pairs: the geometric mean alone;
- the smallest detectable change at the check's power (design.detectable_change);
- a verdict: "worse"/"improved" when the interval excludes no change AND the change is at
  least the floor (threshold / 2 by default: two worker processes or two machine states can
  differ by a percent or two, and a change that small is not what a check is for);
  "unchanged" when the interval lies inside +-threshold and the check could have seen a
  change of the threshold; "inconclusive" otherwise, with the smallest detectable change.

The check's threshold, false-alarm level (spent over looks, split over figures) and power are
its `Design` (harness.analyze.design); the pairs may first be adjusted for the dispatch measurement
(harness.analyze.covariate). docs/statistics.md says why each step is there. Pure functions;
nothing here runs or reads anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import msgspec
import numpy as np

from harness.analyze.covariate import ProbeInfo, adjust_for_probe, probe_note
from harness.analyze.design import Design, detectable_at, pairs_needed, quantiles, share_text
from harness.analyze.estimators import (
    MIN_ROBUST_PAIRS,
    GenerationsInfo,
    generations,
    generations_note,
    huber_location,
    serial_inflation,
)
from harness.analyze.stats import scipy_stats

VERDICTS = ("worse", "improved", "unchanged", "inconclusive")
# From MIN_ROBUST_PAIRS pairs the geometric mean only guards the tails (a change that slows only
# some runs), with this share of the figure's false-alarm level; the Huber location has the rest.
TAIL_SHARE = 0.1


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
                                     # adjusted ones when the dispatch measurement was used)
    spread: float | None = None    # per-pair spread the interval rests on (sd_log, or the Huber
                                   # influence values' sd), before the serial inflation
    # The dispatch measurement as a covariate (covariate.adjust_for_probe), when the pairs had one:
    # None without.
    dispatch_measurement: dict[str, Any] | None = None
    # The pairs' worker generations (suite `restart_s`; estimators.generations): how many, the
    # test of whether they differ, and whether the interval rests on them. None: one worker per
    # side for the whole check (every record before 2026-12-06).
    generations: dict[str, Any] | None = None
    df: int | None = None          # the interval's degrees of freedom (None: n - 1)
    # The threshold the verdict was judged against (None in records written before the stopping
    # rule asked a decided figure for its size too, 2026-12-06).
    threshold: float | None = None
    # A clean reading set aside because too many of its runs were contended (analyze.contended):
    # {"reading": the verdict it was, "contended", "runs", "limit"}; None otherwise.
    contended: dict[str, Any] | None = None

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _kept(info: ProbeInfo | GenerationsInfo | None) -> dict[str, Any] | None:
    """What a verdict keeps of the probe's or the generations' reading: its builtins (a record's
    JSON), the fields never set left out."""
    if info is None:
        return None
    kept: dict[str, Any] = msgspec.to_builtins(info)
    return kept


def _exp(x: float) -> float:
    """exp, inf past float range: an interval on one or two degrees of freedom at a small level
    can reach that far (two worker generations at an early look)."""
    return math.exp(x) if x < 700.0 else math.inf


def plan(p: Paired, design: Design) -> int | None:
    """Pairs a check like p (its spread, serial allowance and location) needs to see the threshold."""
    if p.spread is None:
        return None
    return pairs_needed(p.spread * p.inflation, design, 1.0 - TAIL_SHARE if p.location == "huber" else 1.0)


@dataclass(frozen=True)
class _Reading:
    """One location estimate of the per-pair log ratios and its standard error."""

    center: float
    se: float
    spread: float
    inflation: float
    autocorr: float | None
    df: int                        # of the standard error: n - 1, or generations - 1
    generations: GenerationsInfo | None = None

    @property
    def on_generations(self) -> bool:
        """The standard error is the generations' (they differ), not the pairs'."""
        return self.generations is not None and self.generations.used


def _readings(logs: np.ndarray, widen: float, gens: np.ndarray | None) -> tuple[_Reading, _Reading | None]:
    """(the mean's reading, the robust one or None): the tails' guard (the mean) takes the judged
    (robust) reading's answer on the generations."""
    robust = _robust_reading(logs, widen, gens)
    return _mean_reading(logs, widen, gens, robust.generations if robust else None), robust


def _mean_reading(logs: np.ndarray, widen: float = 1.0, blocks: np.ndarray | None = None,
                  decided: GenerationsInfo | None = None) -> _Reading:
    sd = float(logs.std(ddof=1)) * widen
    infl, r1 = serial_inflation(logs)
    se, df, gens = generations(logs * widen, blocks, sd * infl / math.sqrt(logs.size), infl, decided)
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
    se, df, gens = generations(influence * widen, blocks, spread * infl / math.sqrt(logs.size), infl)
    return _Reading(mu, se, spread, infl, r1, logs.size - 1 if df is None else df, gens)


def _arrays(base: Sequence[float], head: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    b = np.asarray(base, dtype=float)
    h = np.asarray(head, dtype=float)
    if b.shape != h.shape or b.ndim != 1:
        raise ValueError(f"base and head must be paired sequences of one length, got {b.shape} and {h.shape}")
    return b, h


Blocks = Sequence[object] | None   # each pair's worker generation (any hashable label), or None


def _logs(base: Sequence[float], head: Sequence[float], probe: tuple[Sequence[float], Sequence[float]] | None,
          design: Design, blocks: Blocks = None) -> tuple[np.ndarray, float, ProbeInfo | None, np.ndarray, np.ndarray | None]:
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
    probe: the dispatch measurement's (base, head) times of the same pairs, a covariate
    (covariate.adjust_for_probe). blocks: each pair's worker generation
    (estimators.generations), or None."""
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
                      mean_ratio=mean_ratio, dispatch_measurement=_kept(probe_info))
    mean, robust = _readings(logs, widen, gens)
    # The judged reading spends the figure's level, or (robust) all of it but the tails' share.
    main, share = (robust, 1.0 - TAIL_SHARE) if robust else (mean, 1.0)
    if probe_info is not None and probe_info.used:
        probe_info.variance_removed = _removed(main, robust is not None, raw, logs, widen)
    q_a, _ = quantiles(main.df, design, share)
    ratio = math.exp(main.center)
    lo, hi = _exp(main.center - q_a * main.se), _exp(main.center + q_a * main.se)
    det = detectable_at(main.se, main.df, design, share)
    t, floor = design.threshold, design.min_effect
    big = abs(main.center) >= math.log1p(floor)
    inside = lo >= 1.0 - t and hi <= 1.0 + t
    notes = []
    # The tails' guard: a change that slows only a few runs moves the mean, not the typical pair.
    tail = None
    if robust:
        q_m, _ = quantiles(mean.df, design, TAIL_SHARE)
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
                  "huber" if robust else "mean", mean_ratio, main.spread, _kept(probe_info), _kept(main.generations),
                  main.df if main.on_generations else None, t)


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


def bh_selected(ps: Sequence[float], design: Design) -> int:
    """R, how many of m figures' p-values Benjamini-Hochberg selects (the R smallest): the
    largest k whose k-th smallest p-value is at most this look's level for k / m of alpha.

    Not scipy.stats.false_discovery_control: its selection (adjusted p <= q) tests rank k at
    k q / m for one q, while a look's level is not linear in alpha (the spending boundary), so
    rank k's critical value here, level(k alpha / m), is k times rank 1's only with one look."""
    if not ps:
        return 0
    design = replace(design, figures=len(ps))
    srt = sorted(ps)
    return max((k for k in range(1, len(srt) + 1)
                if srt[k - 1] <= replace(design, selected=k).alpha_per_test), default=0)


def judge_family(pairs: Sequence[tuple[Sequence[float], Sequence[float]]], design: Design,
                 probes: Sequence[tuple[Sequence[float], Sequence[float]] | None] | None = None,
                 blocks: Sequence[Blocks] | None = None) -> list[Paired]:
    """The gated figures of one check, judged together: Benjamini-Hochberg over their p-values,
    its k-th critical value this look's level for k of the m figures' share of alpha (k alpha / m
    with one look), selects R of them; a selected figure is judged at R figures' level (its
    interval then excludes no change: a false-coverage-rate interval), the others at one
    figure's. With every figure unchanged this is the family-wise level.
    probes: each figure's dispatch-measurement pairs, or None; blocks: each figure's pairs' worker
    generations, or None (analyze)."""
    m = len(pairs)
    if m == 0:
        return []
    design = replace(design, figures=m, selected=1)
    probes = list(probes) if probes is not None else [None] * m
    blocks = list(blocks) if blocks is not None else [None] * m
    ps = [p_value(b, h, design, pr, bl) for (b, h), pr, bl in zip(pairs, probes, blocks)]
    ranked = sorted(range(m), key=lambda i: ps[i])
    r = bh_selected(ps, design)
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


def detectable_text(p: Paired) -> str:
    return "-" if p.detectable is None or not math.isfinite(p.detectable) else f"{p.detectable:.1%}"
