"""The dispatch measurement: timed after every run when a suite asks for it, carried from a worker
process into the record, and used by the paired verdict as a covariate that takes the host's
moment out of each pair's ratio, without moving the verdict's center or its false-alarm level."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
from harness_helpers import REPO, command_arm, write_suite

from harness.analyze import comparisons, covariate, estimators, paired
from harness.analyze.design import Design
from harness.ci import pullrequest
from harness.ci.twocommits import Comparison, judge
from harness.collect import runner
from harness.collect.engines import Engines
from harness.collect.plan import build_plan
from harness.collect.suite import load_suite
from harness.collect.worker import Worker
from harness.core.errors import UserError

D = Design(threshold=0.02, alpha=0.05, looks=1, figures=1, floor=0.001)


def _moment(rng, n, **kw):
    """scripts/studies/probe_level.py's pairs: the test and the benchmark simulate one thing."""
    return _script().moment(rng, n, **kw)


def _script():
    spec = importlib.util.spec_from_file_location("probe_level", REPO / "scripts" / "studies" / "probe_level.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_probe_takes_the_hosts_moment_out_and_keeps_a_real_change():
    rng = np.random.default_rng(3)
    b, h, pr = _moment(rng, 300, change=math.log(1.03))
    plain, adjusted = paired.analyze(b, h, D), paired.analyze(b, h, D, pr)
    # The state is 4/5 of each pair's variance and the probe sees it with noise 1/4 of it: about
    # two thirds of the variance goes, and the interval narrows by nearly half.
    assert adjusted.dispatch_measurement["used"] and 0.5 < adjusted.dispatch_measurement["variance_removed"] < 0.8
    assert adjusted.detectable < 0.7 * plain.detectable
    assert adjusted.hi - adjusted.lo < 0.7 * (plain.hi - plain.lo)
    # A change of the figure alone (not of the probe) stays whole.
    assert adjusted.lo < 1.03 < adjusted.hi and adjusted.verdict == "worse"
    assert "adjusted for the dispatch measurement" in adjusted.note and plain.dispatch_measurement is None


def test_a_probe_that_moved_is_not_subtracted_and_the_note_says_so():
    # Head's process does everything 5% slower, the engine and the probe alike: subtracting the
    # probe would hide that; the verdict is then the unadjusted one.
    rng = np.random.default_rng(4)
    b, h, pr = _moment(rng, 200, change=math.log(1.05), probe_change=math.log(1.05))
    got, plain = paired.analyze(b, h, D, pr), paired.analyze(b, h, D)
    assert got.dispatch_measurement["used"] is False and got.dispatch_measurement["why"] == "the probe itself moved"
    assert (got.ratio, got.lo, got.hi, got.verdict) == (plain.ratio, plain.lo, plain.hi, plain.verdict)
    assert got.verdict == "worse" and "the probe itself moved +5" in got.note


def test_below_the_minimum_pairs_the_probe_is_kept_but_not_used():
    rng = np.random.default_rng(5)
    b, h, pr = _moment(rng, covariate.MIN_PROBE_PAIRS - 1)
    got = paired.analyze(b, h, D, pr)
    assert got.dispatch_measurement["used"] is False and got.detectable == paired.analyze(b, h, D).detectable
    with pytest.raises(ValueError, match="probe's pairs must match"):
        paired.analyze(b, h, D, (pr[0][:5], pr[1][:5]))


@pytest.mark.parametrize("corr_state,tails", [(0.0, False), (0.8, False), (0.8, True)])
def test_with_the_probe_no_change_keeps_the_false_alarm_level(corr_state, tails):
    # theta is estimated from the same pairs: the interval allows for it (n - 2 degrees of
    # freedom, the probe's own mean), so an A/A check still alarms at most at its level, whether
    # the probe predicts much (0.8) or nothing (0.0), and with a few disturbed pairs (t, 3 df).
    rng = np.random.default_rng(9)
    design = Design(threshold=0.02, alpha=0.05, looks=1, figures=1, floor=0.001)
    sims, n = 1500, 40
    alarms = 0
    for _ in range(sims):
        b, h, pr = _moment(rng, n, sd_state=0.08 * corr_state + 1e-9, sd_own=0.05, tails=tails)
        alarms += paired.analyze(b, h, design, pr).verdict in ("worse", "improved")
    assert alarms / sims < 0.065, alarms / sims


def test_the_family_uses_each_figures_probe():
    rng = np.random.default_rng(6)
    b, h, pr = _moment(rng, 200, change=math.log(1.025))
    b2, h2, _ = _moment(rng, 200)
    with_probe = paired.judge_family([(b, h), (b2, h2)], D, [pr, None])
    without = paired.judge_family([(b, h), (b2, h2)], D)
    assert with_probe[0].dispatch_measurement["used"] and with_probe[1].dispatch_measurement is None
    assert with_probe[0].detectable < without[0].detectable
    assert paired.p_value(b, h, D, pr) < paired.p_value(b, h, D)


def _run(arm, rep, mpt, probe):
    return {"index": rep, "arm": arm, "prompt": "p", "repetition": rep, "status": "ok", "ms_per_token": float(mpt),
            "dispatch_measurement_ms": float(probe), "diagnostics": {"mode": "classic"}}


META = {"machine": "m", "host": {}, "command": "harness pr-check", "duration_s": 1.0}
RECS = {"base": "b.json", "head": "h.json"}


def test_a_check_pairs_the_probe_with_each_figure_and_shows_it():
    rng = np.random.default_rng(8)
    b, h, (pb, ph) = _moment(rng, 60, change=math.log(1.04))
    base = [_run("c", i, b[i], pb[i]) for i in range(60)]
    head = [_run("c", i, h[i], ph[i]) for i in range(60)]
    assert comparisons.pair_sessions(base, head).probes[("c", "ms/token")] == (list(pb), list(ph))
    figs = {f.figure: f for f in judge(base, head, ["c"], D)}
    assert figs["ms/token"].result.dispatch_measurement["used"]
    assert figs[comparisons.PROBE].gated is False and figs[comparisons.PROBE].result.n == 60
    # The check's comment says the pairs were adjusted, and which figures.
    c = Comparison("b" * 40, "h" * 40, D, list(figs.values()), [], {}, RECS, {"rounds": 60, "stopped_because": "budget"}, 1.0)
    md = pullrequest.render_markdown(c, META)
    assert "the dispatch measurement, `dispatch_measurement = true`); for c ms/token the part" in md
    assert "| c dispatch measurement ms |" in md
    # One run without a reading (a probe that could not run): that figure is judged without it.
    head[7] = {**head[7], "dispatch_measurement_ms": None}
    assert comparisons.pair_sessions(base, head).probes == {}
    assert judge(base, head, ["c"], D)[0].result.dispatch_measurement is None
    c = Comparison("b" * 40, "h" * 40, D, judge(base, head, ["c"], D), [], {}, RECS, {"rounds": 60}, 1.0)
    assert "dispatch measurement" not in pullrequest.render_markdown(c, META)
    # The head's worker does the same fixed work 30% faster all through: the comment warns of it.
    head = [{**r, "dispatch_measurement_ms": r["dispatch_measurement_ms"] * 0.7} for r in head[:7] + head[8:]]
    figs = judge(base[:7] + base[8:], head, ["c"], D)
    assert figs[0].result.dispatch_measurement["why"] == "the probe itself moved"
    md = pullrequest.render_markdown(Comparison("b" * 40, "h" * 40, D, figs, [], {}, RECS, {"rounds": 59}, 1.0), META)
    assert "**The dispatch measurement itself moved (-3" in md and "that is a per-process effect" in md


def test_within_a_session_each_arm_against_classic_uses_the_probe():
    rng = np.random.default_rng(10)
    b, h, (pb, ph) = _moment(rng, 40)
    rec = {"suite": {"name": "t", "settings": {}, "pairings": [{"name": "x", "target": "t"}],
                     "prompts": [{"name": "p", "text": "p"}],
                     "arms": [{"name": "c", "block": 1, "pairing": "x", "engine": "e", "env": {}, "timeout_s": 60.0},
                              {"name": "s", "block": 3, "pairing": "x", "engine": "e", "env": {}, "timeout_s": 60.0}]},
           "runs": [r for i in range(40) for r in (_run("c", i, b[i], pb[i]), _run("s", i, h[i], ph[i]))]}
    assert comparisons.judge_vs_classic(rec, D)["s"].dispatch_measurement["used"]


def test_a_suite_asks_for_the_probe_and_the_runner_records_it(tmp_path: Path):
    suite = load_suite(write_suite(tmp_path, [command_arm("a")], repetitions=2, dispatch_measurement=True))
    runs = [runner.run_one(p, suite, Engines(), runner.NullUI(), None) for p in build_plan(suite)]
    assert all(isinstance(r.dispatch_measurement_ms, float) and r.dispatch_measurement_ms > 0 for r in runs)
    off = load_suite(write_suite(tmp_path, [command_arm("a")], name="off", repetitions=1))
    assert off.settings.dispatch_measurement is False
    assert runner.run_one(build_plan(off)[0], off, Engines(), runner.NullUI(), None).dispatch_measurement_ms is None
    with pytest.raises(UserError, match="dispatch_measurement"):
        load_suite(write_suite(tmp_path, [command_arm("a")], name="bad", dispatch_measurement="yes"))


def test_a_worker_process_times_the_probe_and_hands_it_over(tmp_path: Path):
    suite = load_suite(write_suite(tmp_path, [command_arm("a")], repetitions=1, dispatch_measurement=True))
    w = Worker("base", tmp_path, suite.to_dict(), tmp_path / "logs")
    try:
        plan = build_plan(suite)
        out = w.run(runner.RunRequest(arm=suite.arm(plan[0].arm), pairing=suite.pairing(plan[0].pairing),
                                      prompt=suite.prompt(plan[0].prompt), settings=suite.settings))
    finally:
        w.close()
    assert isinstance(out.dispatch_measurement_ms, float) and out.dispatch_measurement_ms > 0


def test_a_few_disturbed_pairs_do_not_set_the_slope():
    # The host disturbs a tenth of the pairs, and then both the run and the probe are slow: those
    # pairs alone correlate the two. A least-squares slope follows them and adds the probe's own
    # noise to every other pair (the typical pair's spread grows); the Huber slope does not.
    rng = np.random.default_rng(12)
    n = 120
    d, x = rng.normal(0.0, 0.04, n), rng.normal(0.0, 0.06, n)
    hit = rng.random(n) < 0.1
    shock = rng.normal(0.0, 0.4, n)
    d[hit] += shock[hit]
    x[hit] += shock[hit]
    ols = float(np.polyfit(x, d, 1)[0])
    assert ols > 0.5 and abs(covariate.huber_slope(d, x)) < 0.25
    b, h, pr = np.ones(n), np.exp(d), (np.ones(n), np.exp(x))
    with_probe, without = paired.analyze(b, h, D, pr), paired.analyze(b, h, D)
    assert with_probe.spread < 1.1 * without.spread
    assert estimators.huber_location(d - ols * x)[1].std() > 1.3 * without.spread


def test_a_sessions_summary_says_what_the_probe_did_whatever_the_verdict():
    from harness_helpers import sequential_section, whole_record

    from harness.analyze.summary import sequential_lines

    rng = np.random.default_rng(13)
    b, h, pr = _moment(rng, 30, sd_own=0.3)
    p = paired.analyze(b, h, D, pr)
    assert p.verdict == "inconclusive" and p.dispatch_measurement["used"]
    rec = whole_record(sequential=sequential_section([{"s": p.to_dict()}], D.to_dict(), budget_s=60, rounds=30))
    line = [ln for ln in sequential_lines(rec) if ln.startswith("  s:")][0]
    assert "inconclusive" in line and "adjusted for the dispatch measurement" in line


def test_a_stored_checks_pairs_replay_with_and_without_the_probe(tmp_path: Path, capsys):
    rng = np.random.default_rng(14)
    state = rng.normal(0.0, 0.1, 60)
    logs, probe_logs = state + rng.normal(0.0, 0.03, 60), state + rng.normal(0.0, 0.03, 60)
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"rows": [{"head": "A/A", "check": 0, "pairs": {
        "classic": {"logs": list(logs), "probe_logs": list(probe_logs)}, "old": {"logs": list(logs)}}}]}))
    assert _script().replay(str(f)) == 0
    out = capsys.readouterr().out
    assert "A/A 0      classic" in out and "old" not in out
    # The probe sees most of each pair's moment here: both slopes take most of the spread out.
    robust = float(out.split("robust: spread with / without the probe, median ")[1].split(",")[0])
    assert robust < 0.6


def test_a_suite_s_old_dispatch_probe_key_still_reads_as_dispatch_measurement(tmp_path: Path):
    # The setting's name before "dispatch measurement": read for one release, never both at once.
    suite = load_suite(write_suite(tmp_path, [command_arm("a")], repetitions=1, dispatch_probe=True))
    assert suite.settings.dispatch_measurement is True
    with pytest.raises(UserError, match="dispatch_probe"):
        load_suite(write_suite(tmp_path, [command_arm("a")], name="both", dispatch_probe=True,
                               dispatch_measurement=False))
