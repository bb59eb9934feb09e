"""Runs set aside for their host are left out of every verdict: records whose lab Mac readings
come from the published macOS outputs (tests/fixtures/macos/: a backup running, battery power,
serious thermal pressure, a busy GPU). The set-aside runs are made 10x slower (or faster) and
every verdict, median and stopping decision must read as if they were not there, while they
still count towards the contended share; the report and the PR comment say so. Nothing is
timed."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness_helpers import REPO

from harness.analyze import compare, comparisons, contended, sequential, spoiled
from harness.analyze.design import Design
from harness.analyze.summary import summarize
from harness.analyze.verdict import judge
from harness.ci import asvsession, pullrequest, twocommits
from harness.ci import reportfiles as report_cli
from harness.cli.report import backfill
from harness.collect import sampling
from harness.collect.host import applegpu, gpuload, macos, thermal
from harness.core.runs import as_run
from harness.core.schema import load_record
from harness.render import hostwords
from harness.render import reportcontext as rp

MACOS = REPO / "tests" / "fixtures" / "macos"
SETTINGS = {"threshold": 0.1, "alpha": 0.05, "watch": {"threshold_pct": 15.0, "contended_share": 0.25}}


def _read(name: str) -> str:
    return (MACOS / name).read_text()


def _gpu(name: str) -> dict[str, Any]:
    g = applegpu.parse_ioreg_gpu(_read(name))
    assert g is not None
    return g.to_dict()


# A quiet Mac, every reading parsed from a published output, and the one published output that
# sets a run aside for each reason.
QUIET: dict[str, Any] = {
    "thermal": {"power_source": thermal.parse_pmset_batt(_read("pmset_batt_m1.txt")),
                "backup_running": thermal.parse_tmutil_status(_read("tmutil_status_idle.txt")),
                "thermal_pressure": macos.parse_thermal_pressure_powermetrics(
                    _read("powermetrics_thermal_m1max.txt"))},
    "gpu": {"limit_pct": gpuload.GPU_BUSY_PCT, "before": _gpu("ioreg_gpu_m1pro.txt"),
            "after": _gpu("ioreg_gpu_m1pro.txt")}}
READINGS: dict[str, tuple[str, str, Any]] = {
    "backup": ("thermal", "backup_running", thermal.parse_tmutil_status(_read("tmutil_status_copying.txt"))),
    "battery": ("thermal", "power_source", thermal.parse_pmset_batt(_read("pmset_batt_on_battery.txt"))),
    "thermal": ("thermal", "thermal_pressure", macos.parse_pmset_pressure(_read("pmset_thermlog_intel_throttled.txt"))),
    "gpu-busy": ("gpu", "after", _gpu("ioreg_gpu_m3max.txt")),   # 48% just after the run
}
REASONS = list(READINGS)


def _load(why: str | None) -> dict[str, Any]:
    load = copy.deepcopy(QUIET)
    if why is not None:
        section, key, value = READINGS[why]
        load[section][key] = copy.deepcopy(value)
    return load


def _run(arm: str, rep: int, ms: float, why: str | None = None, marked: bool = False) -> dict[str, Any]:
    return {"index": rep, "arm": arm, "prompt": "p", "repetition": rep, "status": "ok", "warmup": False,
            "ms_per_token": ms, "decode_tokens_per_s": 1000.0 / ms,
            "marks": ["contended"] if marked else [], "load": _load(why)}


@pytest.mark.parametrize("why", REASONS)
def test_each_published_reading_sets_its_run_aside_and_out_of_the_verdicts(why: str) -> None:
    quiet, spoilt = _run("a", 0, 10.0), _run("a", 0, 10.0, why)
    assert spoiled.reasons(quiet) == () and spoiled.usable(quiet)
    assert spoiled.reasons(spoilt) == (why,)
    assert not spoiled.usable(spoilt) and contended.is_contended(as_run(spoilt))
    # Warm-ups and failed runs were never a verdict's, quiet host or not.
    assert not spoiled.usable({**quiet, "warmup": True}) and not spoiled.usable({**quiet, "status": "failed"})
    assert spoiled.usable_runs([spoilt, quiet]) == [quiet]


# ---------------------------------------------------------------- one session, arm vs classic

def _session(aside: dict[int, str], factor: float = 1.0, drop: bool = False,
             marked: bool = False) -> dict[str, Any]:
    """12 rounds of a classic arm (10 ms/token) and a speculative one (7 ms/token); at the
    repetitions in `aside` the speculative run is set aside (its reading), its time x factor;
    drop: those rounds' two runs not there at all; marked: the watch marks it contended instead."""
    rng = np.random.default_rng(3)
    runs = []
    for i in range(12):
        c, s = (m * math.exp(rng.normal(0.0, 0.01)) for m in (10.0, 7.0))
        if i in aside and drop:
            continue
        spoil = i in aside and not marked
        runs += [_run("classic", i, c),
                 _run("spec", i, s * factor if i in aside else s, aside[i] if spoil else None,
                      marked=i in aside and marked)]
    return {"schema_version": 5, "kind": "harness.record", "session_id": "s", "created": "c",
            "suite": {"name": "s", "settings": SETTINGS, "pairings": [{"name": "x", "target": "t"}],
                      "prompts": [{"name": "p", "text": "x"}],
                      "arms": [{"name": "classic", "pairing": "x", "engine": "e", "block": 1, "env": {}, "timeout_s": 60.0},
                               {"name": "spec", "pairing": "x", "engine": "e", "block": 4, "env": {}, "timeout_s": 60.0}]},
            "runs": runs}


def _reading(rec: dict[str, Any]) -> Any:
    return comparisons.judge_vs_classic(rec, Design(threshold=0.1))["spec"]


@pytest.mark.parametrize("why", REASONS)
def test_a_sessions_reading_is_the_one_without_its_set_aside_pairs(why: str) -> None:
    aside = {0: why, 5: why}
    without = _reading(_session(aside, drop=True))
    assert without.n == 10 and without.verdict == "improved" and without.contended is None
    for factor in (10.0, 0.1):
        assert _reading(_session(aside, factor)) == without
    # A run the watch marked contended stays in the pairs: 10x slower, it moves the reading.
    kept = _reading(_session(aside, 10.0, marked=True))
    assert kept.n == 12 and kept.ratio != without.ratio


@pytest.mark.parametrize("why", REASONS)
def test_set_aside_runs_still_count_towards_the_contended_share(why: str) -> None:
    aside = dict.fromkeys(range(7), why)          # 7 of the pairs' 24 runs: 29%, past a quarter
    got, without = _reading(_session(aside, 10.0)), _reading(_session(aside, drop=True))
    assert without.verdict == "improved" and without.n == 5
    assert got.verdict == "inconclusive"
    assert got.contended == {"reading": "improved", "contended": 7, "runs": 24, "limit": 0.25}
    assert (got.n, got.ratio, got.lo, got.hi) == (without.n, without.ratio, without.lo, without.hi)


def test_report_compare_judges_two_records_without_their_set_aside_runs() -> None:
    before = _session({})
    after, without = _session({0: "battery", 5: "backup"}, 10.0), _session({0: "x", 5: "x"}, drop=True)
    got, base = compare.throughput_changes(before, after), compare.throughput_changes(before, without)
    spec = next(t for t in got[0] if t.arm == "spec")
    ref = next(t for t in base[0] if t.arm == "spec")
    assert spec.ms is not None and ref.ms is not None
    assert spec.ms.judged == ref.ms.judged and spec.ms.verdict == ref.ms.verdict != compare.SLOWER
    assert spec.tok_s_after == ref.tok_s_after
    assert (spec.ms.contended, spec.ms.runs) == (2, 24)       # still counted, not judged


# ---------------------------------------------------------------- a record from the fixture

def _fixture(why: str | None, factor: float = 1.0, drop: bool = False) -> dict[str, Any]:
    """tests/fixtures/report/record.json on a Mac: no contended mark, each run's load read from
    the macOS outputs, block3's first measured run set aside for `why` (time x factor)."""
    rec = load_record(json.loads((REPO / "tests/fixtures/report/record.json").read_text()), "record.json")
    first = next(r["index"] for r in rec["runs"] if r["arm"] == "block3" and not r["warmup"])
    for r in rec["runs"]:
        r["marks"] = [m for m in r.get("marks") or [] if m != "contended"]
        r["load"] = {**(r.get("load") or {}), **_load(why if r["index"] == first else None)}
        if r["index"] == first:
            r["ms_per_token"] *= factor
            r["decode_tokens_per_s"] /= factor
    if drop:
        rec["runs"] = [r for r in rec["runs"] if r["index"] != first]
    return rec


@pytest.mark.parametrize("why", REASONS)
def test_a_fixture_records_verdict_and_medians_leave_the_set_aside_run_out(why: str) -> None:
    without = _fixture(None, drop=True)
    ref = judge(without).of("block3")
    ref_row = next(s for s in summarize(without) if s.arm == "block3")
    for factor in (10.0, 0.1):
        rec = _fixture(why, factor)
        v = judge(rec).of("block3")
        assert (v.outcome, v.reading, v.tok_s, v.spread) == (ref.outcome, ref.reading, ref.tok_s, ref.spread)
        assert why in v.marks and v.runs == ref.runs + 1          # counted, not judged
        row = next(s for s in summarize(rec) if s.arm == "block3")
        assert (row.ms_per_token_median, row.tok_s_median, row.spread) == \
               (ref_row.ms_per_token_median, ref_row.tok_s_median, ref_row.spread)
        assert row.set_aside == 1 and row.set_aside_reasons == {why: 1} and row.runs == ref_row.runs + 1


def test_the_report_says_the_set_aside_runs_were_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    path = tmp_path / "mac.json"
    path.write_text(json.dumps(_fixture("backup", 10.0)))
    md = rp.render(report_cli.context_for(str(path), None, backfill()), "record",
                   user_dir=REPO / "tests/fixtures/report/no-such-templates")
    assert "set aside (backup): a backup was running; left out of the verdicts" in md
    assert "1 set aside (backup 1), not in the figures" in md
    assert "backup: some of its runs set aside for the host (a backup was running), left out of the verdicts" in md


# ---------------------------------------------------------------- compare-commits and pr-check

def _sides(aside: set[int], why: str, factor: float, drop: bool = False) -> tuple[list[Any], list[Any]]:
    """24 pairs of one arm, base and head alike (10 ms/token); head's runs at `aside` set aside
    for `why`, x factor (drop: those pairs not there)."""
    rng = np.random.default_rng(1)
    base, head = [], []
    for i in range(24):
        b, h = (10.0 * math.exp(rng.normal(0.0, 0.01)) for _ in range(2))
        if i in aside and drop:
            continue
        base.append(_run("a", i, b))
        head.append(_run("a", i, h * factor, why) if i in aside else _run("a", i, h))
    return base, head


@pytest.mark.parametrize("why", REASONS)
def test_a_check_whose_head_set_aside_runs_are_slow_does_not_read_slower(why: str) -> None:
    aside, d = {2, 9, 17}, Design(threshold=0.1)
    base, head = _sides(aside, why, 10.0)
    figs = twocommits.judge(base, head, ["a"], d)
    ref = twocommits.judge(*_sides(aside, why, 1.0, drop=True), ["a"], d)
    assert figs[0].result == ref[0].result and figs[0].result.n == 21
    assert figs[0].result.verdict == "unchanged"
    # The live look of the sampling loop judges the same pairs.
    assert twocommits.judge(base, head, ["a"], d, gated_only=True)[0].result == ref[0].result
    c = twocommits.Comparison("b" * 40, "h" * 40, d, figs, [], {}, {"base": "b", "head": "h"}, {"rounds": 24}, 60.0)
    c.notes.contention = contended.sides_info({"head": head, "base": base}, SETTINGS)
    assert c.exit_status == twocommits.PASS and "worse" not in c.headline()
    md = pullrequest.render_markdown(c, {"machine": "m", "host": {}, "command": "harness pr-check",
                                         "duration_s": 60.0}).splitlines()
    said = " ".join(md[:8])
    assert f"set aside for the host: 3 of 24 runs of head ({why} 3), left out of the verdicts" in said
    assert hostwords.LEGEND[why] in said and "slower" not in md[0] and "worse" not in md[0]
    assert all(len(x) <= 80 for x in hostwords.set_aside_lines(c.notes.contention))


def test_the_sampling_loop_never_stops_on_set_aside_pairs() -> None:
    """A budgeted compare-commits loop on a fake clock: each round adds a pair, every fourth
    head run set aside. Whatever those runs read, the looks and the stop are the same."""
    def session(factor: float) -> sequential.Outcome:
        rng = np.random.default_rng(5)
        base: list[dict[str, Any]] = []
        head: list[dict[str, Any]] = []
        now = [0.0]
        design = Design(threshold=0.1, looks=3)

        def do_round(i: int) -> None:
            b, h = (10.0 * math.exp(rng.normal(0.0, 0.02)) for _ in range(2))
            base.append(_run("a", i, b))
            head.append(_run("a", i, h * factor, "gpu-busy") if i % 4 == 0 else _run("a", i, h))
            now[0] += 1.0

        def look(times: tuple[float, ...], sizes: tuple[float, ...]) -> dict[str, Any]:
            figs = twocommits.judge(base, head, ["a"], design.at_looks(times, sizes), gated_only=True)
            return {f"{f.arm} {f.figure}": f.result for f in figs}
        return sampling.sample(sampling.Settings(4, 60, 60.0, 3), lambda: None, do_round, look,
                               sequential.run, clock=lambda: now[0])
    ref = session(1.0)
    for factor in (10.0, 0.1):
        got = session(factor)
        assert (got.rounds, got.stopped) == (ref.rounds, ref.stopped)
        assert [x.figures for x in got.looks] == [x.figures for x in ref.looks]
    assert ref.looks and ref.looks[-1].figures["a ms/token"]["verdict"] == "unchanged"


def test_the_nightlys_asv_samples_leave_set_aside_runs_out() -> None:
    arms = [asvsession.ArmSpec("classic", "classic", 1, ()), asvsession.ArmSpec("spec", "spec", 4, ())]
    got = asvsession.figures_from_record(_session({0: "thermal", 5: "battery"}, 10.0)["runs"], arms)
    ref = asvsession.figures_from_record(_session({0: "x", 5: "x"}, drop=True)["runs"], arms)
    assert got.ms_per_token.samples["spec"] == ref.ms_per_token.samples["spec"]
    assert len(got.ms_per_token.samples["spec"]) == 10
    assert len(got.ms_per_token.samples["classic"]) == 12      # its runs were not set aside
    every = asvsession.figures_from_record(_session(dict.fromkeys(range(12), "backup"), 10.0)["runs"], arms)
    assert "spec" not in every.ms_per_token.samples
    assert every.errors["spec"].startswith("every one of its 12 runs was set aside for its host")


def test_the_dashboards_point_is_the_median_without_the_set_aside_run() -> None:
    from harness.analyze import series

    def point(raw: dict[str, Any]) -> Any:
        rec = load_record(raw, "record.json")   # as the site loads each record
        view = series.host_series("mac", [(series.commit_view(rec, "r.md", "r.html", "c" * 40), rec)])
        return next(a for a in view.arms if a.arm == "block3").points[0]
    got, ref = point(_fixture("gpu-busy", 10.0)), point(_fixture(None, drop=True))
    assert (got.ms_per_token, got.runs) == (ref.ms_per_token, ref.runs) == (ref.ms_per_token, 1)


def test_a_row_whose_every_run_was_set_aside_has_no_timings_and_says_why() -> None:
    rec = _fixture(None)
    for r in rec["runs"]:
        if r["arm"] == "block3" and not r["warmup"]:
            r["load"] = _load("backup")
    row = next(s for s in summarize(rec) if s.arm == "block3")
    assert (row.runs, row.set_aside, row.tok_s_median, row.ms_per_token_median) == (2, 2, None, None)
    assert "every run set aside" in row.flags and row.do_not_publish
    assert judge(rec).of("block3").tok_s is None
