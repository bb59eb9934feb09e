"""Worker generations: a compare-commits check that restarts both sides' workers during its
sampling (suite `restart_s`) tags every run with its worker's generation, and the paired verdict
counts a per-process effect (the generations differ) instead of reading it as a change, while a
check without one keeps its power."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from harness_helpers import REPO, command_arm, one_commit_repo, write_suite

from harness.analyze import comparisons, paired
from harness.analyze.checknotes import CheckNotes
from harness.analyze.design import Design
from harness.ci import pullrequest
from harness.ci.twocommits import Comparison, compare_commits, judge
from harness.collect.suite import load_suite
from harness.core.errors import UserError

D = Design(threshold=0.02, alpha=0.05, looks=1, figures=1, floor=0.01)


def _script():
    spec = importlib.util.spec_from_file_location("generations_level", REPO / "scripts" / "studies" / "generations_level.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _verdicts(tau: float, shift: float, sims: int, seed: int, g: int = 8) -> dict[str, list[paired.Paired]]:
    """scripts/studies/generations_level.py's checks: the test and the benchmark simulate one thing."""
    mod, rng = _script(), np.random.default_rng(seed)
    out: dict[str, list[paired.Paired]] = {"generations": [], "one worker": []}
    for _ in range(sims):
        for k, r in mod.one(rng, 320, g, 0.15, tau, shift, 5.0, D).items():
            out[k].append(r)
    return out


def _rate(rs: list[paired.Paired], *verdicts: str) -> float:
    return sum(r.verdict in verdicts for r in rs) / len(rs)


def test_a_per_process_effect_reads_as_a_change_unless_the_generations_are_counted():
    # Two processes of one code 3% apart (sd) for their whole life: a check with one worker per
    # side calls most A/A checks worse or improved; told the 8 generations, about its level.
    rs = _verdicts(tau=0.03, shift=0.0, sims=150, seed=3)
    assert _rate(rs["one worker"], "worse", "improved") > 0.4
    assert _rate(rs["generations"], "worse", "improved") <= 0.10
    used = [r for r in rs["generations"] if r.generations["used"]]
    assert len(used) > 0.8 * len(rs["generations"])
    assert all(r.df == 7 and r.generations["count"] == 8 for r in used)
    assert all("8 worker generations differ" in r.note and "7 degrees of freedom" in r.note for r in used)


def test_without_a_process_effect_counting_generations_costs_little():
    rs = _verdicts(tau=0.0, shift=0.0, sims=150, seed=4)
    # The pretest finds a difference at about its own level, and no more false alarms follow.
    share = sum(r.generations["used"] for r in rs["generations"]) / 150
    assert 0.1 <= share <= 0.4, share
    assert _rate(rs["generations"], "worse", "improved") <= 0.08
    # A real +3% is still caught about as often as by the check that ignores generations.
    caught = _verdicts(tau=0.0, shift=0.03, sims=100, seed=5)
    assert _rate(caught["generations"], "worse") >= _rate(caught["one worker"], "worse") - 0.1
    assert _rate(caught["generations"], "worse") >= 0.85


def test_one_generation_or_none_judges_the_pairs_as_before():
    rng = np.random.default_rng(6)
    base = np.exp(rng.normal(0, 0.1, 60))
    head = base * np.exp(rng.normal(0.01, 0.1, 60))
    plain = paired.analyze(base, head, D)
    one = paired.analyze(base, head, D, blocks=["1/1"] * 60)
    assert (one.lo, one.hi, one.verdict, one.detectable) == (plain.lo, plain.hi, plain.verdict, plain.detectable)
    assert one.generations == {"count": 1, "used": False} and plain.generations is None and one.df is None
    with pytest.raises(ValueError, match="generations must match"):
        paired.analyze(base, head, D, blocks=["1/1"] * 59)


def _run(arm: str, rep: int, mpt: float, gen: int | None) -> dict:
    r = {"index": rep, "arm": arm, "prompt": "p", "repetition": rep, "status": "ok", "ms_per_token": float(mpt),
         "diagnostics": {"mode": "classic"}}
    if gen is not None:
        r["worker_generation"] = gen
    return r


def test_pairs_carry_their_generations_and_the_comment_says_what_they_did():
    rng = np.random.default_rng(7)
    gens = np.repeat(np.arange(1, 9), 40)
    u = rng.normal(0, 0.04, 9)[gens]                       # the head's process effect, per generation
    b = np.exp(rng.normal(0, 0.1, gens.size))
    h = b * np.exp(u + rng.normal(0, 0.1, gens.size))
    base = [_run("c", i, b[i], int(gens[i])) for i in range(gens.size)]
    head = [_run("c", i, h[i], int(gens[i])) for i in range(gens.size)]
    assert comparisons.pair_sessions(base, head).blocks[("c", "ms/token")][:2] == ["1/1", "1/1"]
    fig = judge(base, head, ["c"], D)[0]
    assert fig.result.generations["used"] and fig.result.df == 7
    c = Comparison("b" * 40, "h" * 40, D, [fig], [], {}, {"base": "b", "head": "h"}, {"rounds": 320}, 1.0)
    meta = {"machine": "m", "host": {}, "command": "harness pr-check", "duration_s": 1.0}
    assert "restarted every" not in pullrequest.render_markdown(c, meta)   # no restart_s: a crash restart
    c.notes = CheckNotes(restart_s=20.0)
    md = pullrequest.render_markdown(c, meta)
    assert "restarted every 20 s during the check (`restart_s`), so the pairs came from 8 worker generations" in md
    assert "rather than reading as a change: c ms/token (7 degrees of freedom)." in md
    # One run that names no generation: that figure is judged on its pairs alone.
    head[5] = _run("c", 5, h[5], None)
    assert comparisons.pair_sessions(base, head).blocks == {}
    assert judge(base, head, ["c"], D)[0].result.generations is None


def test_a_check_restarts_its_workers_and_tags_every_run(tmp_path: Path):
    repo = one_commit_repo(tmp_path)
    suite = load_suite(write_suite(tmp_path, [command_arm("a")], repetitions=4, warmups=1, restart_s=1e-6))
    c = compare_commits(repo, "HEAD", "HEAD", suite, tmp_path / "work")
    assert c.notes.generations == {"base": 4, "head": 4}   # a fresh pair before rounds 2, 3, 4
    assert c.notes.restart_s == 1e-6
    assert c.notes.check_duty.restarts == 3 and c.notes.check_duty.restart_wall_s > 0
    md = pullrequest.render_markdown(c, {"machine": "m", "host": {}, "command": "harness pr-check", "duration_s": 1.0})
    assert "3 restarts of both workers took" in md, md
    for side in ("base", "head"):
        rec = json.loads(Path(c.records[side]).read_text())
        measured = [r for r in rec["runs"] if not r.get("warmup")]
        assert [r["worker_generation"] for r in measured] == [1, 2, 3, 4]
        # The restarts' warm-ups are not runs of the record: one warm-up and four measured runs.
        assert len(rec["runs"]) == 5 and [r["index"] for r in rec["runs"]] == [0, 1, 2, 3, 4]
        assert [g["before_round"] for g in rec["restarts"]] == [1, 2, 3]
        assert [g["generation"] for g in rec["restarts"]] == [2, 3, 4]
        assert all(g["warmup_wall_s"] > 0 for g in rec["restarts"])
    assert [f for f in c.figures if f.gated][0].result.generations["count"] == 4
    with pytest.raises(UserError, match="restart_s"):
        load_suite(write_suite(tmp_path, [command_arm("a")], name="bad", restart_s=0))


def test_a_check_whose_every_warm_up_fails_on_both_sides_stops_there_with_one_line(tmp_path: Path):
    # A suite whose engine cannot start (a missing module, say) once measured the whole budget
    # and ended "inconclusive" (exit 3), as if the host were merely noisy.
    repo = one_commit_repo(tmp_path)
    suite = load_suite(write_suite(tmp_path, [command_arm("a", 1, {"FAKE_CRASH": "1"})], repetitions=4, warmups=1,
                                   budget_s=60.0))
    with pytest.raises(UserError, match=r"every warm-up run failed on both sides \(the first: command exited") as e:
        compare_commits(repo, "HEAD", "HEAD", suite, tmp_path / "work")
    assert "check the suite (" in str(e.value) and "\n" not in str(e.value)
    recs = sorted((tmp_path / "work" / "records").glob("*.json"))
    assert len(recs) == 2      # kept, each with its failed warm-up and no measured run
    for r in recs:
        runs = json.loads(r.read_text())["runs"]
        assert [(x["warmup"], x["status"]) for x in runs] == [(True, "failed")]


def test_two_generations_at_an_early_look_give_an_unbounded_interval_not_an_error():
    # Two generations 20% apart, judged at a first look's small level: one degree of freedom puts
    # the interval past float range; the verdict says so instead of failing the check.
    rng = np.random.default_rng(1)
    b = np.exp(rng.normal(0, 0.1, 60))
    h = b * np.exp(np.r_[np.full(30, 0.1), np.full(30, -0.1)] + rng.normal(0, 0.05, 60))
    d = Design(threshold=0.1, alpha=0.05, looks=4, figures=3, look=1)
    r = paired.analyze(b, h, d, blocks=["1/1"] * 30 + ["2/2"] * 30)
    assert r.verdict == "inconclusive" and r.df == 1 and r.hi == float("inf") and r.detectable == float("inf")
    assert "no change is detectable from these pairs" in r.note and "1 degree of freedom" in r.note
    assert paired.detectable_text(r) == "-"


def test_the_tails_guard_follows_the_judged_readings_generations():
    # A fault check on a lent H100 with restart_s = 20 (docs/measurements/h100-paired-check-
    # 2026-12-06c.json): +2.4% over two generations. The judged (Huber) reading found the
    # generations differ and could not see the change on 1 degree of freedom, while the tails'
    # guard judged the same pairs alone and called them worse: "FAIL ... (-23.1% to +36.3%)".
    # Both readings now take the judged one's answer.
    stored = json.loads((REPO / "docs" / "measurements" / "h100-paired-check-2026-12-06c.json").read_text())
    pairs = stored["checks"]["fault"]["rows"][0]["pairs"]["classic"]
    logs, probe, gens = (np.asarray(pairs[k]) for k in ("logs", "probe_logs", "generations"))
    ones = np.ones(logs.size)
    d = Design(threshold=0.02, alpha=0.05, looks=4, figures=1, look=2)
    r = paired.analyze(ones, np.exp(logs), d, (ones, np.exp(probe)), list(gens))
    assert r.generations["count"] == 2 and r.generations["used"], r.generations
    assert r.verdict == "inconclusive" and r.lo < 1.0 < r.hi, (r.verdict, r.lo, r.hi, r.note)
    # Told nothing of the generations, the same pairs are a caught fault (the typical pair +2.4%).
    alone = paired.analyze(ones, np.exp(logs), d, (ones, np.exp(probe)))
    assert alone.verdict == "worse" and alone.lo > 1.0


def test_the_interval_on_generations_is_the_cluster_robust_one_on_g_minus_1_df():
    # Three generations of unequal size, far apart, and one pair with no reading (dropped, its
    # generation with it): the standard error is sqrt(G / (G - 1) sum_g S_g^2) / n, S_g the sum of
    # a generation's centred log ratios, and the t quantile has G - 1 = 2 degrees of freedom.
    from scipy import stats

    rng = np.random.default_rng(12)
    gens = ["1/1"] * 5 + ["2/2"] * 5 + ["3/3"] * 6
    logs = np.r_[rng.normal(0.03, 0.01, 5), rng.normal(-0.02, 0.01, 5), rng.normal(0.01, 0.01, 6)]
    base = np.ones(16)
    base[0] = np.nan
    r = paired.analyze(base, np.exp(logs), D, blocks=gens)
    kept, g = logs[1:], np.asarray(gens[1:])
    dev = np.array([(kept[g == k] - kept.mean()).sum() for k in ("1/1", "2/2", "3/3")])
    se = np.sqrt(3 / 2 * (dev @ dev)) / kept.size
    q = stats.t.ppf(1 - D.alpha / 2, 2)
    assert r.n == 15 and r.location == "mean" and r.df == 2 and r.generations["used"]
    assert r.lo == pytest.approx(np.exp(kept.mean() - q * se)) and r.hi == pytest.approx(np.exp(kept.mean() + q * se))
    # The pairs' own standard error (no generations) is the plain one, n - 1 degrees of freedom.
    plain = paired.analyze(base, np.exp(logs), D)
    q_plain = stats.t.ppf(1 - D.alpha / 2, 14)
    assert plain.hi == pytest.approx(np.exp(kept.mean() + q_plain * kept.std(ddof=1) / np.sqrt(15)))



def _left_behind(work: Path) -> list[str]:
    """Processes whose command line names the check's work directory (its workers, their engines)."""
    found = []
    for p in Path("/proc").iterdir():
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if p.name.isdigit() and str(work) in cmd:
            found.append(f"{p.name}: {cmd[:200]}")
    return found


def test_ctrl_c_during_a_restart_ends_the_check_keeps_its_runs_and_leaves_no_worker(tmp_path: Path):
    import signal
    import time

    from harness_helpers import clean_env, harness_argv, load
    repo = one_commit_repo(tmp_path)
    # Every run takes 2 s, and both workers are restarted before every round after the first.
    suite = write_suite(tmp_path, [command_arm("a", env={"FAKE_SLEEP_S": "2"})], repetitions=3, warmups=1,
                        restart_s=1e-6)
    work = tmp_path / "work"
    proc = subprocess.Popen(harness_argv("compare-commits", "HEAD", "HEAD", "--repo", str(repo), "--suite", str(suite),
                                         "--work", str(work)),
                            cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def measured() -> list[int]:
        recs = sorted((work / "records").glob("*.json")) if (work / "records").exists() else []
        return [sum(1 for r in load(p)["runs"] if not r.get("warmup")) for p in recs]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (len(measured()) == 2 and min(measured()) >= 1):
        time.sleep(0.05)
    assert measured() == [1, 1], measured()
    # The first round is recorded on both sides, so the restart has begun: the new workers start
    # and run their 2 s warm-up. Interrupt it there.
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, (proc.returncode, err[-2000:])
    assert err.strip().splitlines()[-1] == (f"harness: interrupted; the runs so far are kept in {work / 'records'} "
                                            "(complete: false); a check does not resume: run it again"), err[-500:]
    for p in sorted((work / "records").glob("*.json")):
        rec = load(p)
        assert rec["complete"] is False and [r["status"] for r in rec["runs"]] == ["ok", "ok"], rec["runs"]
        assert "restarts" not in rec   # the signal came while the restart was under way
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _left_behind(work):
        time.sleep(0.1)
    assert not _left_behind(work), _left_behind(work)
