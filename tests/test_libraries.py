"""The library calls that replaced hand-written statistics give the numbers the hand-written code
gave: the Wilson interval (scipy.stats.binomtest(...).proportion_ci) on every arm's per-step
acceptance in the committed records and on a grid of (k, n); Benjamini-Hochberg
(scipy.stats.false_discovery_control) on the records' paired p-values and on synthetic sets with
ties and p-values at the level, and the paired check's selection (paired.bh_selected) where
its levels are BH's (one look); the bootstrap of a ratio of medians (scipy.stats.bootstrap) on
every sample pair the committed reports feed it. The references below are the old bodies, kept
only here."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import false_discovery_control

from harness.analyze import stats, summary
from harness.analyze.changepoints import benjamini_hochberg
from harness.analyze.design import Design
from harness.analyze.facts import Facts
from harness.analyze.overridepairs import one_override_pairs
from harness.analyze.paired import bh_selected, p_value
from harness.ci.reportfiles import inputs_for
from harness.core.runs import as_record
from harness.core.schema import load_record
from harness.render.verdictwords import times

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


def _hand_written_bootstrap(a: Sequence[float], b: Sequence[float], level: float = 0.95,
                            n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """The percentile bootstrap of median(a)/median(b) as the harness drew it before scipy's."""
    arr_a, arr_b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    med_a, med_b = float(np.median(arr_a)), float(np.median(arr_b))
    rng = np.random.default_rng(seed)
    boot_a = np.median(arr_a[rng.integers(0, arr_a.size, size=(int(n_boot), arr_a.size))], axis=1)
    boot_b = np.median(arr_b[rng.integers(0, arr_b.size, size=(int(n_boot), arr_b.size))], axis=1)
    ratios = boot_a / boot_b
    tail = (1.0 - level) / 2.0
    lo, hi = np.percentile(ratios, [100.0 * tail, 100.0 * (1.0 - tail)])
    return med_a / med_b, float(lo), float(hi)


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


def _hand_written_judge_selection(ps: Sequence[float], design: Design) -> int:
    """paired.judge_family's Benjamini-Hochberg selection as it was written inline."""
    design = replace(design, figures=len(ps), selected=1)
    ranked = sorted(range(len(ps)), key=lambda i: ps[i])
    return max((k + 1 for k, i in enumerate(ranked) if ps[i] <= replace(design, selected=k + 1).alpha_per_test),
               default=0)


def _random_p_sets(seeds: int = 300) -> list[list[float]]:
    # 1 to 12 figures, some changed (tiny p-values), some not (uniform).
    out = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        m = int(rng.integers(1, 13))
        changed = rng.random(m) < 0.4
        out.append([float(x) for x in np.where(changed, rng.random(m) ** 6 * 0.05, rng.random(m))])
    return out


def test_the_paired_checks_selection_with_one_look_is_scipys_bh() -> None:
    sets = [ps for ps in map(_record_p_values, map(_record, RECORDS)) if ps]
    sets += [[p for ps in sets for p in ps], *_random_p_sets()]
    selected = 0
    for ps in sets:
        for alpha in (0.01, 0.05, 0.10):
            design = Design(alpha=alpha, looks=1)
            r = bh_selected(ps, design)
            assert r == _hand_written_judge_selection(ps, design)
            assert r == int(np.sum(false_discovery_control(ps) <= alpha)), (ps, alpha)
            selected += r > 0
    assert selected >= 100      # the sets select figures, not only none


def test_a_spending_look_is_not_bh_at_any_one_level() -> None:
    # Sequential checks test rank k at level(k alpha / m), and the boundary's level is not linear
    # in alpha: an early look's rank-2 value is far more than twice rank 1's. BH at one q agrees
    # with rank 1 only for q = m c_1, and then misses a pair the check selects.
    for look in range(1, 5):
        design = Design(looks=4, look=look, figures=3)
        c = [replace(design, selected=k).alpha_per_test for k in (1, 2, 3)]
        ps = [0.9 * c[1], 0.9 * c[1], 0.5]
        for sets in ([ps], _random_p_sets(60)):
            for s in sets:
                assert bh_selected(s, design) == _hand_written_judge_selection(s, design)
        if look < 4:
            assert c[1] > 1.5 * c[0]
            assert bh_selected(ps, design) == 2
            assert int(np.sum(false_discovery_control(ps) <= 3 * c[0])) == 0


def _bootstrap_inputs(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[tuple[tuple[float, ...], ...]]:
    """Every (a, b) a report of this record bootstraps: the summary's speedups and the
    one-override pairs."""
    seen: list[tuple[tuple[float, ...], ...]] = []
    real = stats.bootstrap_ratio_ci

    def spy(a: Sequence[float], b: Sequence[float], *args: float, **kw: float) -> tuple[float, float, float]:
        seen.append((tuple(a), tuple(b)))
        return real(a, b, *args, **kw)

    monkeypatch.setattr(stats, "bootstrap_ratio_ci", spy)
    data = _record(path)
    summary.summarize(data)
    one_override_pairs(Facts(str(path), as_record(data), inputs_for(data)))
    monkeypatch.setattr(stats, "bootstrap_ratio_ci", real)
    return seen


def _same_bootstrap(a: Sequence[float], b: Sequence[float], level: float, seed: int) -> None:
    new, old = stats.bootstrap_ratio_ci(a, b, level, seed=seed), _hand_written_bootstrap(a, b, level, seed=seed)
    assert new == pytest.approx(old, rel=1e-12, abs=0.0), (a, b, level, seed)
    assert [times(x) for x in new] == [times(x) for x in old], (a, b, level, seed)


def test_bootstrap_from_scipy_draws_the_same_intervals_on_every_pair_the_reports_feed_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = {kn for p in RECORDS for kn in _bootstrap_inputs(monkeypatch, p)}
    assert len(pairs) >= 40 and any(min(map(len, ab)) >= 5 for ab in pairs)
    for a, b in pairs:
        for level in (0.90, 0.95):
            _same_bootstrap(a, b, level, seed=0)


def test_bootstrap_from_scipy_draws_the_same_intervals_with_one_value_on_a_side() -> None:
    rng = np.random.default_rng(7)
    for na, nb in [(1, 1), (1, 4), (4, 1), (2, 2), (5, 5), (8, 3)]:
        a, b = list(rng.uniform(5, 10, na)), list(rng.uniform(5, 10, nb))
        for seed in (0, 3):
            _same_bootstrap(a, b, 0.95, seed)
