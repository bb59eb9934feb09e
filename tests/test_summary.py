"""Summary rows: medians, spread flags, contention, speedup over classic, per-step CI."""

from __future__ import annotations

import msgspec
import pytest
from harness_helpers import sequential_section, whole_record

from harness.analyze.summary import duty_line, has_cooldown, machine_summary, summarize
from harness.analyze.verdict import judge
from harness.core.suitespec import Settings
from harness.render.termsummary import SessionSummary, summary_lines


def _text(rec: dict) -> str:
    """The terminal summary of `rec` (tests/test_terminal.py tests its layout)."""
    s = SessionSummary(judge(rec), summarize(rec), "r.json")
    return "\n".join(t.plain for t in summary_lines(s))


def _rec(tps: dict[str, list[float]], marks: dict[str, list[str]] | None = None, cooldown: float = 5.0,
         **settings: object) -> dict:
    runs = []
    for arm, xs in tps.items():
        for i, x in enumerate(xs):
            runs.append({"index": len(runs), "arm": arm, "pairing": "fx", "prompt": "p1", "repetition": i,
                         "warmup": False, "status": "ok", "decode_tokens_per_s": x, "ms_per_token": 1000 / x,
                         "marks": (marks or {}).get(arm, []) if i == 0 else [], "shipping": True,
                         "label": "shipping configuration", "identity": {"status": "identical"},
                         "diagnostics": {"proposed": 10, "accepted": 6, "per_step_tested": 8,
                                         "emitted_per_verify": 1.6} if arm != "classic" else {}})
    arms = [{"name": a, "pairing": "fx", "engine": "specdec", "block": 1 if a == "classic" else 3,
             "env": {}, "timeout_s": 60.0} for a in tps]
    return {"schema_version": 5, "kind": "harness.record", "session_id": "t", "created": "2026-12-07T00:00:00",
            "suite": {"name": "t", "settings": {"spread_threshold": 0.04, "cooldown_s": cooldown, "max_tokens": 8,
                                                "temp": 0.0, "seed": 0, **settings},
                      "pairings": [{"name": "fx", "target": "embedded", "drafter": "embedded"}],
                      "arms": arms, "prompts": [{"name": "p1", "text": "x"}]}, "runs": runs}


def test_speedup_acceptance_and_clean_flags() -> None:
    rows = {r.arm: r for r in summarize(_rec({"classic": [100, 101, 100], "b3": [150, 151, 150]}))}
    b3 = rows["b3"]
    assert b3.tok_s_median == 150 and b3.speedup == pytest.approx(1.5) and b3.classic_arm == "classic"
    assert b3.acceptance == 0.6 and b3.per_step_acceptance == pytest.approx(18 / 24)
    lo, hi = b3.per_step_ci
    assert lo < 0.75 < hi
    assert not b3.do_not_publish and b3.flags == [] and b3.shipping
    assert "b3" in _text(_rec({"classic": [100, 101, 100], "b3": [150, 151, 150]}))


def test_no_bootstrap_interval_for_the_speedup_from_fewer_than_five_runs_a_side() -> None:
    # Two runs a side once read "1.64x (1.32-2.16)" beside "smallest detectable 3229.6%".
    few = {r.arm: r for r in summarize(_rec({"classic": [100, 104], "b3": [150, 157]}))}["b3"]
    assert few.speedup == pytest.approx(153.5 / 102) and few.speedup_ci is None
    five = {r.arm: r for r in summarize(_rec({"classic": [100, 104, 99, 101, 103],
                                               "b3": [150, 157, 149, 152, 155]}))}["b3"]
    lo, hi = five.speedup_ci
    assert lo < five.speedup < hi


def test_memory_is_the_largest_over_the_runs_with_what_the_run_added() -> None:
    rec = _rec({"classic": [100, 101, 100], "b3": [150, 151, 150], "b4": [150, 151, 150]})
    for i, r in enumerate(x for x in rec["runs"] if x["arm"] == "b3"):
        r["diagnostics"].update(peak_memory_bytes=(60 + i) * 2**20, resident_memory_bytes=(50 - i) * 2**20)
    for i, r in enumerate(x for x in rec["runs"] if x["arm"] == "b4"):
        # The process holds 90 MiB; this generation used 30 MiB of weights and added 2 + i.
        r["diagnostics"].update(peak_memory_bytes=(92 + i) * 2**20, resident_memory_bytes=90 * 2**20,
                                model_memory_bytes=30 * 2**20)
    rows = {r.arm: r for r in summarize(rec)}
    assert rows["b3"].memory_bytes == 62 * 2**20 and rows["b3"].run_memory_bytes == 14 * 2**20
    assert rows["b4"].memory_bytes == 34 * 2**20 and rows["b4"].run_memory_bytes == 4 * 2**20
    assert rows["classic"].memory_bytes is None    # an engine that reports none: unknown, not 0


def test_an_arm_whose_gate_declined_shows_declined_not_a_speedup() -> None:
    rec = _rec({"classic": [100, 101, 100], "b3": [136, 137, 136]})
    for r in rec["runs"]:
        if r["arm"] == "b3":
            r["gate"] = {"outcome": "declined", "engaged": False}
            r["diagnostics"] = {}
    rows = {r.arm: r for r in summarize(rec)}
    assert rows["b3"].declined and not rows["classic"].declined
    text = _text(rec)
    b3 = next(ln for ln in text.splitlines() if ln.startswith("b3"))
    assert b3.endswith(" declined") and "1.36x" not in text, text


def test_spread_and_contention_mean_do_not_publish() -> None:
    rows = {r.arm: r for r in summarize(_rec({"classic": [100, 120, 100], "b3": [150, 151, 150]},
                                             marks={"b3": ["contended"]}))}
    assert rows["classic"].do_not_publish and any("may be unstable (spread" in f for f in rows["classic"].flags)
    assert rows["b3"].do_not_publish and "1 contended" in rows["b3"].flags   # no counts: an old record


def test_contended_flag_gives_the_sample_counts_and_undersampled_runs() -> None:
    rec = _rec({"classic": [100, 100, 100]}, marks={"classic": ["contended", "watch_undersampled"]})
    rec["runs"][0]["load"] = {"contention": {"samples": 8, "contended_samples": 3}}
    rec["runs"][1]["load"] = {"contention": {"samples": 12, "contended_samples": 1}}   # not marked
    row = summarize(rec)[0]
    assert "1 contended (3 of 8 samples)" in row.flags and "1 watch undersampled" in row.flags
    assert row.do_not_publish and (row.contended_samples, row.contention_samples) == (3, 8)


def test_no_cooldown_is_not_publishable() -> None:
    rows = summarize(_rec({"classic": [100, 100]}, cooldown=0))
    assert rows[0].do_not_publish and any("no cooldown" in f for f in rows[0].flags)



def test_a_cooldown_ratio_is_a_cooldown() -> None:
    assert has_cooldown(Settings(cooldown_s=0, cooldown_ratio=0.25, cooldown_cap_s=None))
    assert not has_cooldown(Settings(cooldown_s=0, cooldown_ratio=0.25, cooldown_cap_s=0))
    assert not has_cooldown(msgspec.convert({"cooldown_s": 0}, Settings))   # an old record's settings
    rows = summarize(_rec({"classic": [100, 100]}, cooldown=0, cooldown_ratio=1.0))
    assert not any("no cooldown" in f for f in rows[0].flags)


def test_duty_in_the_json_line_and_the_line_under_the_table() -> None:
    rec = _rec({"classic": [100, 100]})
    rec["duty"] = {"session_wall_s": 178.0, "run_s": 130.0, "measured_run_s": 112.0,
                   "duty_cycle": 112 / 178, "waiting_s": 21.0, "runs": 2}
    assert machine_summary(rec, summarize(rec), "r.json")["duty"]["duty_cycle"] == 112 / 178
    assert duty_line(rec) == ("duty cycle 63%: 112 s of measured runs in 178 s of session wall "
                              "(warm-ups 18 s, waiting 21 s)")
    old = _rec({"classic": [100, 100]})
    assert duty_line(old) == "" and machine_summary(old, summarize(old), "r.json")["duty"] is None
    # A record written before finish: computed from its session wall time.
    old["session_wall_s"] = 8.0
    for r in old["runs"]:
        r["wall_s"] = 2.0
    assert duty_line(old) == ("duty cycle 50%: 4.0 s of measured runs in 8.0 s of session wall "
                              "(warm-ups 0.0 s, waiting 0.0 s)")


def test_sequential_lines_say_why_sampling_stopped_and_each_arm_against_classic() -> None:
    from harness.analyze.summary import sequential_lines
    fig = {"n": 39, "ratio": 1.577, "lo": 1.418, "hi": 1.754, "detectable": 0.144, "verdict": "worse", "note": ""}
    unres = {"n": 39, "ratio": 1.06, "lo": 0.93, "hi": 1.20, "detectable": 0.177, "verdict": "inconclusive",
             "note": "smallest detectable change 17.7%, above the 10% threshold"}
    rec = whole_record(sequential=sequential_section([{}, {"block3-inexact": fig, "block2": unres}],
                                                     {"looks": 4, "figures": 2}, budget_s=150, rounds=13,
                                                     stopped_because="the time budget was spent"))
    lines = sequential_lines(rec)
    assert lines[0] == "budget 150 s of measuring: 13 repetitions, 2 look(s); stopped: the time budget was spent"
    assert "  block3-inexact: +57.7% (+41.8% to +75.4%) over 39 pairs, slower than classic; smallest detectable 14.4%" in lines
    assert any(ln.startswith("  block2: +6.0%") and "inconclusive; smallest detectable 17.7%" in ln for ln in lines)
    assert sequential_lines(whole_record()) == []


def test_a_run_watched_from_a_thread_is_flagged_and_an_old_record_is_not() -> None:
    rec = _rec({"classic": [100, 100, 100]})
    rec["runs"][0]["load"] = {"contention": {"samples": 14, "watcher": "thread: the watch process exited"}}
    rec["runs"][1]["load"] = {"contention": {"samples": 0, "watcher": "lost during this run: the watch process exited"}}
    rec["runs"][2]["load"] = {"contention": {"samples": 20, "watcher": "process"}}
    row = summarize(rec)[0]
    assert row.watch_in_thread == 2 and "2 watched from a thread" in row.flags
    # Before the watch had a process of its own, records do not say: nothing to flag.
    assert summarize(_rec({"classic": [100, 100, 100]}))[0].watch_in_thread == 0
