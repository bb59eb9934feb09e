"""The library calls that replaced hand-written statistics give the numbers the hand-written code
gave: the Wilson interval (scipy.stats.binomtest(...).proportion_ci) on every arm's per-step
acceptance in the committed records and on a grid of (k, n), and Benjamini-Hochberg
(scipy.stats.false_discovery_control) on the records' paired p-values and on synthetic sets with
ties and p-values at the level. The references below are the old bodies, kept only here."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import pytest

from harness.analyze import stats, summary
from harness.analyze.changes import benjamini_hochberg
from harness.analyze.paired import p_value
from harness.core.schema import load_record

RECORDS = sorted((Path(__file__).resolve().parents[1] / "reports").glob("2026*.json"))


def _hand_written_wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson interval as the harness computed it before scipy's (no continuity correction)."""
    z = float(stats.scipy_stats().norm.ppf(0.5 + level / 2.0))
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    lo = 0.0 if k == 0 else max(0.0, center - half)
    hi = 1.0 if k == n else min(1.0, center + half)
    return lo, hi


def _hand_written_bh(pvalues: Sequence[float]) -> list[float]:
    """BH-adjusted p-values (step-up) as the harness computed them before scipy's."""
    m = len(pvalues)
    ranked = sorted(range(m), key=lambda i: pvalues[i])
    adj = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = ranked[rank - 1]
        running = min(running, pvalues[i] * m / rank)
        adj[i] = min(1.0, running)
    return adj


def _record(p: Path) -> dict:
    return load_record(json.loads(p.read_text()), str(p))


def _printed(x: float) -> str:
    # Reports print a proportion as a percentage with one decimal at most (73.2%).
    return f"{x:.1%}"


def _per_step_counts(monkeypatch: pytest.MonkeyPatch, record: dict) -> list[tuple[int, int]]:
    """The (k, n) every arm's per-step acceptance interval is computed from, as summarize asks."""
    seen: list[tuple[int, int]] = []
    real = stats.wilson_ci

    def spy(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
        seen.append((k, n))
        return real(k, n, level)

    monkeypatch.setattr(stats, "wilson_ci", spy)
    summary.summarize(record)
    monkeypatch.setattr(stats, "wilson_ci", real)
    return seen


def test_the_committed_records_have_per_step_counts_to_compare(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = [kn for p in RECORDS for kn in _per_step_counts(monkeypatch, _record(p))]
    assert len(RECORDS) >= 10 and len(counts) >= 10


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_wilson_from_scipy_prints_as_before_on_every_arm_of_a_record(
        path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, n in _per_step_counts(monkeypatch, _record(path)):
        new, old = stats.wilson_ci(k, n), _hand_written_wilson(k, n)
        assert [_printed(x) for x in new] == [_printed(x) for x in old], (k, n)
        assert new == pytest.approx(old, abs=1e-12), (k, n)


@pytest.mark.parametrize("level", [0.90, 0.95, 0.99])
def test_wilson_from_scipy_matches_the_hand_written_one_on_a_grid_with_the_edges(level: float) -> None:
    grid = [(k, n) for n in [*range(1, 41), 99, 100, 1734, 10_000] for k in {0, 1, n // 3, n // 2, n - 1, n}
            if 0 <= k <= n]
    for k, n in grid:
        new, old = stats.wilson_ci(k, n, level), _hand_written_wilson(k, n, level)
        assert new == pytest.approx(old, abs=1e-12), (k, n, level)
        assert [_printed(x) for x in new] == [_printed(x) for x in old], (k, n, level)
        # The edges are exact, as before: nothing crosses 0 or 1.
        assert (new[0] == 0.0) == (k == 0) and (new[1] == 1.0) == (k == n)


def _record_p_values(record: dict) -> list[float]:
    """Each speculative arm's paired p-value against its classic arm, runs paired by repetition
    (ms per token), as the paired check reads them."""
    rows = summary.summarize(record)
    by_rep: dict[tuple[str, str], dict[int, float]] = {}
    for r in record["runs"]:
        if r.get("warmup") or r["status"] != "ok" or not isinstance(r.get("ms_per_token"), (int, float)):
            continue
        by_rep.setdefault((r["arm"], r["prompt"]), {})[int(r.get("repetition", 0))] = float(r["ms_per_token"])
    ps = []
    for s in rows:
        if s.block == 1 or s.classic_arm is None:
            continue
        a, b = by_rep.get((s.arm, s.prompt), {}), by_rep.get((s.classic_arm, s.prompt), {})
        reps = sorted(a.keys() & b.keys())
        if len(reps) >= 2:
            ps.append(p_value([b[i] for i in reps], [a[i] for i in reps]))
    return ps


def _same_selection(ps: Sequence[float], alpha: float) -> None:
    new, old = benjamini_hochberg(ps), _hand_written_bh(ps)
    assert new == pytest.approx(old, rel=1e-12, abs=0.0)
    assert [a <= alpha for a in new] == [a <= alpha for a in old], (ps, alpha)


def _textbook_selection(ps: Sequence[float], alpha: float) -> list[bool]:
    """BH's rule in exact rational arithmetic: select the R smallest, R the largest k with
    p_(k) <= k alpha / m."""
    m, srt = len(ps), sorted(ps)
    r = max((k for k in range(1, m + 1) if Fraction(srt[k - 1]) <= k * Fraction(alpha) / m), default=0)
    return [r > 0 and p <= srt[r - 1] for p in ps]


def test_bh_from_scipy_selects_as_before_on_the_records_paired_p_values() -> None:
    sets = [ps for ps in map(_record_p_values, map(_record, RECORDS)) if ps]
    assert sum(map(len, sets)) >= 10   # the records hold enough paired arms to compare on
    every = [p for ps in sets for p in ps]
    for ps in [*sets, every]:
        for alpha in (0.01, 0.05, 0.10):
            _same_selection(ps, alpha)


def test_bh_from_scipy_selects_as_before_with_ties_and_p_values_near_the_level() -> None:
    cases = [
        [0.01, 0.04, 0.03, 0.005],              # textbook: adjusted 0.02, 0.04, 0.04, 0.02
        [0.049] * 5 + [0.051] * 3,              # ties either side of the level
        [0.01, 0.01, 0.02, 0.02, 0.9],          # ties below the level
        [0.0, 1.0, 0.5, 0.5],                   # the ends of [0, 1]
        [0.0125, 0.025, 0.0375, 0.05],          # each p_(k) exactly k * 0.05 / 4
        [0.2],                                  # one figure
    ]
    # Every triple of p-values on a grid around the levels, ties included, a hair off each point.
    grid = [p / 40 for p in range(9)]
    for nudge in (1.0 - 1e-9, 1.0 + 1e-9):
        cases += [[p * nudge for p in c] for c in itertools.combinations_with_replacement(grid, 3)]
    for ps in cases:
        for alpha in (0.01, 0.025, 0.05, 0.10):
            _same_selection(ps, alpha)
    assert benjamini_hochberg([]) == []


@pytest.mark.parametrize("ps, alpha", [([0.0, 0.0, 0.025], 0.025), ([0.025, 0.05, 0.1], 0.1),
                                       ([0.05, 0.05, 0.05], 0.05), ([0.1 / 3, 0.2 / 3, 0.1], 0.1)])
def test_bh_from_scipy_keeps_a_largest_p_value_equal_to_the_level(ps: list[float], alpha: float) -> None:
    # p_(m) = alpha is selected by the rule; the hand-written p * m / m rounded up past alpha
    # for m = 3 and dropped it. Only p-values exactly at a critical value differ so.
    assert [a <= alpha for a in benjamini_hochberg(ps)] == _textbook_selection(ps, alpha) == [True] * 3
    assert [a <= alpha for a in _hand_written_bh(ps)] != _textbook_selection(ps, alpha)
