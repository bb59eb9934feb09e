"""The paired verdict and the sequential rule, through the real functions.

The simulations check what the words promise: a true change of exactly the smallest detectable
size is caught about `power` of the time, no change is almost never called worse, and repeated
looks under the budget keep the false-alarm rate at or below alpha.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from dataclasses import replace

import numpy as np
import pytest
from harness_helpers import REPO

from harness.analyze import comparisons, estimators, paired, sequential, spending
from harness.analyze.design import Design, detectable_change, pairs_needed
from harness.analyze.paired import analyze, judge_family, p_value

D = Design(threshold=0.10, alpha=0.05, looks=4, figures=3)


def _pairs(rng, n, sd, change=0.0, base=10.0):
    """n pairs whose log ratio is change + noise; each pair shares a drifting machine state."""
    drift = np.exp(rng.normal(0, 0.3, n))           # slow machine state, common to both runs
    b = base * drift * np.exp(rng.normal(0, sd / math.sqrt(2), n))
    h = base * drift * math.exp(change) * np.exp(rng.normal(0, sd / math.sqrt(2), n))
    return b, h


def test_design_spends_alpha_over_looks_and_splits_it_over_figures():
    planned = (0.25, 0.5, 0.75, 1.0), (1.0, 2.0, 3.0, 4.0)
    assert D.alpha_per_test == pytest.approx(spending.nominal_level(0.05 / 3, *planned))   # the last look's
    assert replace(D, look=2).alpha_per_test == pytest.approx(                               # an earlier one's
        spending.nominal_level(0.05 / 3, planned[0][:2], planned[1][:2]))
    assert replace(D, look=2).alpha_per_test < D.alpha_per_test < 0.05 / 3
    assert D.min_effect == pytest.approx(0.05)
    with pytest.raises(ValueError):
        Design(threshold=0)
    with pytest.raises(ValueError):
        Design(looks=0)


def test_a_tight_no_change_is_unchanged_and_a_big_change_is_worse():
    rng = np.random.default_rng(1)
    b, h = _pairs(rng, 40, 0.03)
    p = paired.analyze(b, h, D)
    assert p.verdict == "unchanged" and p.detectable < 0.10 and p.lo < 1 < p.hi
    b, h = _pairs(rng, 40, 0.03, change=math.log(1.2))
    p = paired.analyze(b, h, D)
    assert p.verdict == "worse" and 1.15 < p.ratio < 1.25 and p.lo > 1
    p = paired.analyze(h, b, D)
    assert p.verdict == "improved" and p.hi < 1


def test_noise_that_hides_the_threshold_is_inconclusive_with_its_detectable_change():
    rng = np.random.default_rng(2)
    b, h = _pairs(rng, 8, 0.25)
    p = paired.analyze(b, h, D)
    assert p.verdict == "inconclusive"
    assert p.detectable > 0.10 and "smallest detectable" in p.note


def test_a_significant_change_below_the_floor_is_never_worse():
    rng = np.random.default_rng(3)
    b, h = _pairs(rng, 400, 0.02, change=math.log(1.02))
    p = paired.analyze(b, h, D)
    assert p.lo > 1.0                      # significant...
    assert p.verdict == "unchanged" and "below the 5% floor" in p.note   # ...but not a regression


def test_the_drift_common_to_a_pair_cancels():
    # Unpaired, a 30% machine drift would swamp a 15% change; paired, it is seen.
    rng = np.random.default_rng(4)
    b, h = _pairs(rng, 30, 0.04, change=math.log(1.15))
    assert np.std(np.log(b)) > 0.2
    assert paired.analyze(b, h, D).verdict == "worse"


def test_bad_pairs_are_inconclusive_not_errors():
    assert paired.analyze([], [], D).verdict == "inconclusive"
    assert paired.analyze([1.0], [1.1], D).note.startswith("one pair")
    assert "non-positive" in paired.analyze([0.0, 1.0], [1.0, 1.0], D).note
    with pytest.raises(ValueError):
        paired.analyze([1.0, 2.0], [1.0], D)


@pytest.mark.parametrize("n,sd,low", [(8, 0.05, 0.70), (20, 0.15, 0.60), (60, 0.2, 0.70), (150, 0.15, 0.72)])
def test_a_change_of_the_detectable_size_is_caught_about_80_percent_of_the_time(n, sd, low):
    rng = np.random.default_rng(n)
    # The detectable size for the true spread, then checks of that true change. From 20 to about
    # 60 pairs the serial-correlation allowance (an estimate from few pairs) widens some intervals
    # of independent pairs, so power at that size is lower; the detectable change each such
    # check reports is then larger too: it never claims to see more than it can. Under 20 pairs
    # no allowance is made.
    # From MIN_ROBUST_PAIRS the typical pair is judged on the Huber location (95% of the mean's
    # efficiency for normal pairs) at all of the level but the tails' share.
    robust = n >= estimators.MIN_ROBUST_PAIRS
    d = (detectable_change(sd / math.sqrt(0.95), n, D, 1.0 - paired.TAIL_SHARE) if robust
         else detectable_change(sd, n, D))
    sims = 1500
    checks = [paired.analyze(*_pairs(rng, n, sd, change=math.log1p(d)), D) for _ in range(sims)]
    caught = sum(p.verdict == "worse" for p in checks)
    assert low <= caught / sims <= 0.90, (d, caught / sims)
    if n >= estimators.MIN_SERIAL_PAIRS:
        assert float(np.mean([p.detectable for p in checks])) >= d
    else:
        assert all(p.inflation == 1.0 for p in checks)


def test_no_change_is_called_worse_at_most_at_the_per_test_level():
    rng = np.random.default_rng(7)
    sims = 4000
    worse = sum(paired.analyze(*_pairs(rng, 10, 0.08), D).verdict == "worse" for _ in range(sims))
    # One side of alpha_per_test (0.0076 at the last look), with room for simulation error; the old
    # unpaired rule called 8-18% of real changes "caught" and had no stated level at all.
    one_side = D.alpha_per_test / 2
    assert worse / sims <= one_side + 3 * math.sqrt(one_side / sims)



def _script(name):
    """A script of scripts/ as a module: the tests and the benchmarks simulate one thing."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "studies" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ar1(rng, n, rho, sd=0.1):
    """Per-pair log ratios with no change whose neighbours are alike (a state that outlives a
    pair): scripts/studies/serial_level.py's own series, so the test and the benchmark simulate one thing."""
    return _script("serial_level").ar1(rng, n, rho, sd)


def test_serial_correlation_widens_the_standard_error_and_nothing_narrows_it():
    rng = np.random.default_rng(11)
    infl, r1 = estimators.serial_inflation(_ar1(rng, 4000, 0.5))
    # The true factor is sqrt((1 + rho) / (1 - rho)) = 1.73.
    assert 0.45 < r1 < 0.55 and 1.6 < infl < 1.85
    infl, _ = estimators.serial_inflation(rng.normal(0.0, 0.1, 4000))
    assert 1.0 <= infl < 1.08
    infl, r1 = estimators.serial_inflation(_ar1(rng, 4000, -0.4))
    assert r1 < -0.3 and infl == 1.0       # never narrower than the independent-pairs interval
    assert estimators.serial_inflation(np.array([0.1, -0.1])) == (1.0, None)
    # The check says why its interval is wider than the pairs' spread alone would make it.
    x = _ar1(rng, 400, 0.5)
    p = paired.analyze(np.ones(400), np.exp(x), D)
    plain = detectable_change(p.sd_log, 400, D)
    assert p.inflation > 1.4 and p.detectable > plain and "successive pairs alike" in p.note
    assert "successive" not in paired.analyze(*_pairs(rng, 400, 0.1), D).note


def test_serially_correlated_pairs_keep_the_false_alarm_level():
    # One look, one figure: alpha 5% over both directions. At rho = 0.3 (the H100's A/A pairs read
    # 0.19-0.25) the independent-pairs interval calls about 14% of no-changes worse or improved,
    # Newey-West's alone about 7%.
    design = Design(threshold=0.02, alpha=0.05, looks=1, figures=1, floor=0.001)
    rng = np.random.default_rng(5)
    sims, n = 1500, 300
    alarms = plain = 0
    for _ in range(sims):
        x = _ar1(rng, n, 0.3)
        p = paired.analyze(np.ones(n), np.exp(x), design)
        alarms += p.verdict in ("worse", "improved")
        se = x.std(ddof=1) / math.sqrt(n)
        plain += abs(x.mean()) / se > 1.968        # the t quantile at 0.975, 299 df
    assert plain / sims > 0.11, plain / sims     # the data really are correlated enough to matter
    assert alarms / sims < 0.065, alarms / sims
    assert p.autocorr is not None and p.inflation >= 1.0

def test_a_plan_is_the_first_n_that_resolves_at_the_checks_own_spread():
    n = pairs_needed(0.2, D)
    assert n is not None
    assert detectable_change(0.2, n, D) <= 0.10 < detectable_change(0.2, n - 1, D)
    assert pairs_needed(5.0, D, limit=1000) is None
    # A robust check plans at its own spread, allowance and share of the level.
    rng = np.random.default_rng(41)
    p = paired.analyze(*_pairs(rng, 200, 0.2), D)
    need = paired.plan(p, D)
    s = p.spread * p.inflation
    assert p.location == "huber" and need == pairs_needed(s, D, 1.0 - paired.TAIL_SHARE)
    assert need > pairs_needed(s, D)
    assert paired.plan(paired.analyze([1.0], [1.1], D), D) is None


def _mixed(rng, n, rho=0.0, sd=0.1):
    """scripts/studies/serial_level.py's heavy-tailed series: 85% of pairs quiet, 15% disturbed."""
    return _script("serial_level").ar1(rng, n, rho, sd, noise="mixed")


def test_from_enough_pairs_the_typical_pair_is_judged_and_a_few_disturbed_runs_weigh_little():
    rng = np.random.default_rng(21)
    x = _mixed(rng, 300)
    d2 = Design(threshold=0.02, looks=4, figures=1)   # a floor (1%) under both detectables
    p = paired.analyze(np.ones(300), np.exp(x), d2)
    assert p.location == "huber" and p.mean_ratio == pytest.approx(math.exp(x.mean()))
    # The robust spread is well under the pairs' sd (the disturbed 15% carry most of it), so the
    # same pairs see a smaller change than their mean could.
    mean_only = detectable_change(p.sd_log * p.inflation, 300, d2)
    assert p.spread < 0.75 * p.sd_log and p.detectable < 0.8 * mean_only
    # Fewer pairs than a scale can be estimated from, or no scale at all: the mean, as before.
    assert paired.analyze(np.ones(19), np.exp(x[:19]), d2).location == "mean"
    same = np.r_[np.zeros(30), x[:10]]            # 30 of 40 pairs exactly equal: MAD 0
    assert paired.analyze(np.ones(40), np.exp(same), D).location == "mean"


def test_heavy_tailed_correlated_pairs_keep_the_false_alarm_level():
    design = Design(threshold=0.02, alpha=0.05, looks=1, figures=1, floor=0.001)
    rng = np.random.default_rng(6)
    sims, n = 1500, 200
    alarms = sum(paired.analyze(np.ones(n), np.exp(_mixed(rng, n, 0.3)), design).verdict in ("worse", "improved")
                 for _ in range(sims))
    assert alarms / sims < 0.065, alarms / sims


def test_a_change_in_a_few_runs_only_is_caught_by_the_tails_guard():
    # 10% of head's runs 60% slower, the rest unchanged: the typical pair reads no change, the mean
    # of the pairs +5%; the verdict may not say "unchanged" for that.
    rng = np.random.default_rng(22)
    n = 400
    x = rng.normal(0.0, 0.03, n) + np.where(rng.random(n) < 0.10, math.log(1.6), 0.0)
    p = paired.analyze(np.ones(n), np.exp(x), Design(threshold=0.10, looks=4, figures=1))
    assert abs(p.ratio - 1.0) < 0.01 and p.mean_ratio > 1.04
    assert p.verdict == "worse" and "the typical pair reads" in p.note
    # Fewer slow runs, the guard's interval reaches no change: not worse, but the mean is shown.
    y = np.where(x > 0.3, x - math.log(1.6) + math.log(1.5), x)
    q = paired.analyze(np.ones(n), np.exp(y), Design(threshold=0.10, looks=4, figures=1))
    assert q.verdict == "unchanged" and "the mean of the pairs reads +4." in q.note
    # and its p-value, for Benjamini-Hochberg, is the guard's over its share
    assert p_value(np.ones(n), np.exp(x)) < 0.001


# --- the sequential rule ---------------------------------------------------------------------

class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _seq(rng, change, sd, budget=100.0, round_s=1.0, looks=4, min_rounds=5):
    clock = _Clock()
    xs: list[float] = []
    ys: list[float] = []
    design = Design(threshold=0.10, alpha=0.05, looks=looks, figures=1)

    def do_round(i):
        b, h = _pairs(rng, 1, sd, change)
        xs.append(float(b[0]))
        ys.append(float(h[0]))
        clock.t += round_s

    return sequential.run(min_rounds, 10_000, budget, looks, do_round,
                          lambda times, sizes: {"x": paired.analyze(xs, ys, design.at_looks(times, sizes))},
                          started=0.0, clock=clock)


def test_sampling_stops_once_the_threshold_is_resolved():
    out = _seq(np.random.default_rng(8), 0.0, 0.05)
    assert out.stopped == "resolved"
    assert out.rounds < 100 and out.looks[-1].resolved
    assert out.final["x"]["verdict"] == "unchanged"


def test_sampling_spends_the_budget_when_the_noise_is_high_and_says_so():
    out = _seq(np.random.default_rng(9), 0.0, 0.6)
    assert out.stopped in ("budget", "looks")
    assert len(out.looks) == 4 and out.rounds >= 95
    assert out.final["x"]["verdict"] == "inconclusive"


def test_looks_are_at_most_the_design_and_follow_the_budget():
    out = _seq(np.random.default_rng(10), 0.0, 0.4, budget=40.0)
    assert [lk.rounds for lk in out.looks] == [10, 20, 30, 40]
    assert [lk.index for lk in out.looks] == [1, 2, 3, 4]


def test_the_looks_spend_alpha_on_a_boundary_that_keeps_most_of_it_for_the_last():
    d = Design(threshold=0.02, alpha=0.05, looks=4, figures=2)
    levels = [replace(d, look=j).alpha_per_test for j in range(1, 5)]
    assert levels == sorted(levels) and levels[-1] == d.alpha_per_test
    # The last look tests near one look's level (0.025 a figure), well above the even split's half.
    assert 0.05 / 2 / 2 < d.alpha_per_test < 0.05 / 2
    assert Design(looks=1).look_share == 1.0 and Design(looks=1, figures=2).alpha_per_test == 0.025
    with pytest.raises(ValueError):
        Design(looks=4, look=5)
    with pytest.raises(ValueError):
        Design(looks=4, look=2, times=(0.5,), sizes=(10.0,))
    # The same pairs: the last look sees a smaller change than an earlier one.
    assert detectable_change(0.1, 200, d) < detectable_change(0.1, 200, replace(d, look=3))
    # A check whose budget ran out at its third look spends what is left there.
    early_end = d.at_looks((0.25, 0.5, 1.0), (10.0, 20.0, 30.0))
    assert early_end.alpha_per_test > replace(d, look=3).alpha_per_test
    # Looks at their real times and sizes: a look that came late, after more rounds, tests at more.
    assert d.at_looks((0.25, 0.6), (10.0, 30.0)).alpha_per_test > replace(d, look=2).alpha_per_test


def test_a_look_records_its_time_and_the_verdict_reuses_the_schedule():
    out = _seq(np.random.default_rng(10), 0.0, 0.4, budget=40.0)
    times, sizes = out.schedule()
    assert times[:3] == pytest.approx((0.25, 0.5, 0.75)) and times[-1] == 1.0
    assert sizes == (10.0, 20.0, 30.0, 40.0)


def test_without_a_budget_exactly_the_minimum_and_one_look():
    out = _seq(np.random.default_rng(11), 0.0, 0.4, budget=None)
    assert out.stopped == "fixed" and out.rounds == 5 and len(out.looks) == 1


def test_repeated_looks_keep_the_false_alarm_rate_at_alpha():
    rng = np.random.default_rng(12)
    sims = 400
    alarms = sum(_seq(rng, 0.0, 0.3, budget=60.0).final["x"]["verdict"] == "worse" for _ in range(sims))
    assert alarms / sims <= 0.05


# --- which runs pair ------------------------------------------------------------------------

def _run(arm, prompt, rep, mpt, mode="classic", rounds=0, phase=None, status="ok"):
    d = {"mode": mode, "rounds": rounds, "decode_ms": mpt * 10, "phase_ms": phase or {}}
    return {"index": rep, "arm": arm, "prompt": prompt, "repetition": rep, "warmup": False, "status": status,
            "ms_per_token": mpt, "diagnostics": d}


def test_between_sessions_pairs_by_arm_prompt_and_repetition_with_open_phase_names():
    base = [_run("a", "p", 0, 1.0), _run("a", "p", 1, 2.0), _run("s", "p", 0, 3.0, "speculative", 5,
                                                                 {"host_readback": 1.0, "verify": 4.0})]
    head = [_run("a", "p", 1, 2.2), _run("a", "p", 0, 1.1), _run("a", "p", 2, 9.0),
            _run("s", "p", 0, 3.3, "speculative", 5, {"host_readback": 2.0, "verify": 4.0})]
    t = comparisons.between_sessions(base, head)
    assert t[("a", "ms/token")] == ([1.0, 2.0], [1.1, 2.2])
    assert t[("s", "phase ms/round: host_readback")] == ([0.2], [0.4])
    assert ("a", "ms/round") not in t


def test_failed_runs_and_warmups_do_not_pair():
    base = [_run("a", "p", 0, 1.0, status="failed"), {**_run("a", "p", 1, 1.0), "warmup": True}]
    head = [_run("a", "p", 0, 1.0), _run("a", "p", 1, 1.0)]
    assert comparisons.between_sessions(base, head) == {}


def test_vs_classic_pairs_the_same_round():
    rec = {"suite": {"name": "t", "settings": {}, "pairings": [{"name": "x", "target": "t"}],
                     "prompts": [{"name": "p", "text": "p"}, {"name": "q", "text": "q"}],
                     "arms": [{"name": "c", "block": 1, "pairing": "x", "engine": "e", "env": {}, "timeout_s": 60.0},
                              {"name": "s", "block": 3, "pairing": "x", "engine": "e", "env": {}, "timeout_s": 60.0}]},
           "runs": [_run("c", "p", 0, 1.0), _run("s", "p", 0, 0.5), _run("c", "p", 1, 2.0),
                    _run("s", "p", 1, 1.0), _run("s", "q", 0, 0.1)]}
    assert comparisons.vs_classic(rec) == {"s": ("c", [1.0, 2.0], [0.5, 1.0])}


def test_benjamini_hochberg_over_the_gated_figures_sees_what_bonferroni_misses() -> None:
    # Three gated figures: two moved by ~4%, one unchanged. Split Bonferroni-fashion (alpha / 3)
    # the weaker of the two is not significant; BH selects both, judges each at 2 x alpha / 3,
    # and draws their intervals at that level, which then exclude no change.
    rng = np.random.default_rng(5)
    base = [list(np.exp(rng.normal(0, 0.01, 10))) for _ in range(3)]
    moves = (1.045, 1.025, 1.0)
    head = [[x * m * float(np.exp(rng.normal(0, 0.02))) for x in b] for b, m in zip(base, moves)]
    design = Design(threshold=0.10, alpha=0.05, looks=1, figures=3, floor=0.01)
    ps = [p_value(b, h) for b, h in zip(base, head)]
    assert sorted(ps)[1] > 0.05 / 3 and sorted(ps)[1] <= 2 * 0.05 / 3, ps     # the case BH exists for
    alone = [analyze(b, h, design) for b, h in zip(base, head)]
    fam = judge_family(list(zip(base, head)), design)
    assert [p.verdict for p in alone][:2].count("worse") == 1
    assert [p.verdict for p in fam][:2] == ["worse", "worse"]
    assert all(p.lo > 1.0 for p in fam[:2])
    assert fam[2].verdict != "worse"


def test_with_nothing_changed_the_family_is_judged_at_the_family_wise_level() -> None:
    rng = np.random.default_rng(6)
    pairs = [(list(np.exp(rng.normal(0, 0.02, 12))), list(np.exp(rng.normal(0, 0.02, 12)))) for _ in range(4)]
    design = Design(threshold=0.10, alpha=0.05, looks=2, figures=4)
    assert judge_family(pairs, design) == [analyze(b, h, design) for b, h in pairs]


def test_rejudge_pairs_replays_a_stored_checks_looks(tmp_path, capsys):
    mod = _script("rejudge_pairs")
    rng = np.random.default_rng(31)
    quiet = [round(float(v), 5) for v in rng.normal(0.0, 0.01, 400)]
    slow = [round(float(v), 5) for v in rng.normal(0.2, 0.01, 40)]
    f = tmp_path / "m.json"
    f.write_text(json.dumps({"checks": {"a": {"rows": [{"head": "A/A", "pairs": {"classic": {"logs": quiet}}}]},
                                        "b": [{"head": "F", "pairs": {"classic": {"logs": slow}}}]}}))
    argv, sys.argv = sys.argv, ["rejudge_pairs.py", str(f)]
    try:
        assert mod.main() == 0
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    # the quiet A/A resolves "unchanged" at its first look and stops; the slow one is worse
    assert "checks.a.rows[0] (A/A): 400 pairs" in out and "look 1, 100 pairs: unchanged" in out
    assert "the mean alone: detectable" in out
    assert "look 2" not in out.split("checks.b")[0]
    assert "checks.b[0] (F)" in out and "worse +22" in out
    f.write_text(json.dumps({"rows": []}))
    sys.argv = ["rejudge_pairs.py", str(f)]
    try:
        assert mod.main() == 2
    finally:
        sys.argv = argv
    assert "no per-pair logs" in capsys.readouterr().err


def test_a_caught_change_is_sampled_on_until_its_size_is_known_to_within_the_threshold():
    # +30% in noisy pairs: caught ("worse") long before the interval is narrow. Sampling stops
    # only once the smallest detectable change is within the 10% threshold too.
    out = _seq(np.random.default_rng(3), 0.30, 0.5)
    early = [lk for lk in out.looks if lk.figures["x"]["verdict"] == "worse"
             and lk.figures["x"]["detectable"] > 0.10]
    assert early and not any(lk.resolved for lk in early)
    assert out.final["x"]["verdict"] == "worse"
    assert out.stopped != "resolved" or out.final["x"]["detectable"] <= 0.10
    # A reading from before the rule (no threshold kept) stays resolved once decided.
    old = paired.Paired(50, 1.3, 1.01, 1.6, 0.4, "worse")
    assert old.resolved and not replace(old, threshold=0.10).resolved
    assert replace(old, threshold=0.10, detectable=0.08).resolved


def test_shares_print_as_given_never_rounded_to_a_whole_percent():
    # A 2.5% threshold or a 0.2% false-alarm level once printed as "2%" and "0%".
    from harness.analyze.design import share_text
    assert [share_text(x) for x in (0.1, 0.02, 0.025, 0.002, 0.075)] == ["10%", "2%", "2.5%", "0.2%", "7.5%"]
