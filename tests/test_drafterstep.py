"""The drafter-step split and the verify cost by shape: analyses and report sections, on the
frozen real record with the fields an MTP engine reports written into its runs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from harness_helpers import REPO

from harness.analyze import drafterstep
from harness.ci import reportfiles as report_cli
from harness.cli.report import backfill
from harness.render import mdtable
from harness.render import reportcontext as rp

RECORD = REPO / "tests" / "fixtures" / "report" / "record.json"
NO_USER_TEMPLATES = REPO / "tests" / "fixtures" / "report" / "no-such-templates"
STAGES = {"ids_upload": 0.5, "layers": 6.0, "lm_head": 2.0, "sample": 0.3, "readback": 0.2}   # ms per run


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def record() -> dict[str, Any]:
    return copy.deepcopy(json.loads(RECORD.read_text()))


def runs(rec: dict[str, Any], arm: str) -> list[dict[str, Any]]:
    return [r for r in rec["runs"] if r["arm"] == arm and r["status"] == "ok"]


def with_split(rec: dict[str, Any], arm: str = "block3-profile", missing_ms: float = 0.05) -> dict[str, Any]:
    """Every run of the profiled arm reports a draft_block split that leaves `missing_ms` of its
    phase unaccounted, and an accept-hook split."""
    for r in runs(rec, arm):
        d = r["diagnostics"]
        d["phase_ms"]["draft_block"] = sum(STAGES.values()) + missing_ms
        d["drafter_split"] = {"draft_block": {"forwards": d["rounds"], "ms": dict(STAGES)},
                              "accept_hook": {"forwards": d["rounds"], "ms": {"trim": 0.1, "layers": 1.0}}}
    return rec


def render(tmp: Path, rec: dict[str, Any]) -> str:
    p = tmp / "r.json"
    p.write_text(json.dumps(rec))
    return rp.render(report_cli.context_for(str(p), None, backfill()), "record", user_dir=NO_USER_TEMPLATES)


def test_the_split_closes_against_its_phase_and_names_the_largest_stage() -> None:
    rec = with_split(record())
    got = {s.phase: s for s in drafterstep.drafter_splits(rec)}
    s = got["draft_block"]
    n = len([r for r in runs(rec, "block3-profile") if not r["warmup"]])   # measured runs only
    assert s.total_ms == pytest.approx(n * sum(STAGES.values()))
    assert s.closure_ms == pytest.approx(n * 0.05)
    assert s.closure_pct == pytest.approx(0.05 / (sum(STAGES.values()) + 0.05))
    assert s.dominant == "layers"
    assert got["accept_hook"].dominant == "layers"


def test_only_profiled_runs_give_a_split() -> None:
    rec = with_split(record())
    for r in runs(rec, "block3-profile"):
        r["diagnostics"]["profile"] = False
    assert drafterstep.drafter_splits(rec) == []


def test_the_report_shows_the_split_and_its_closure(tmp_path: Path) -> None:
    md = render(tmp_path, with_split(record()))
    assert "<summary>Drafter step split (profile mode)</summary>" in md
    sec = md.split("<summary>Drafter step split (profile mode)</summary>")[1].split("</details>")[0]
    t = mdtable.parse(sec)[0]
    # Stage labels come from the engine's declaration.
    assert [row[0] for row in t[1:]] == ["ids upload", "layers (fc + decoder layer)", "LM head (borrowed)", "sample",
                                         "readback", "stages total"]
    assert "to within 0.55%" in sec and "the largest stage is layers" in sec
    assert "Profile mode's own cost" in sec
    # The profile comparison no longer says the engine cannot split the step.
    assert "does not split the drafter step further" not in md


def test_a_phase_without_its_own_time_has_no_closure(tmp_path: Path) -> None:
    rec = with_split(record())
    r0 = next(r for r in runs(rec, "block3-profile") if not r["warmup"])
    del r0["diagnostics"]["phase_ms"]["draft_block"]        # one run's round split lacks the phase
    s = next(x for x in drafterstep.drafter_splits(rec) if x.phase == "draft_block")
    assert s.phase_ms is None and s.closure_ms is None and s.closure_pct is None
    sec = render(tmp_path, rec).split("<summary>Drafter step split (profile mode)</summary>")[1].split("</details>")[0]
    assert "Closure unknown: the round split has no time of its own" in sec and "to within 0.00%" not in sec


def test_a_record_without_a_split_has_no_section(tmp_path: Path) -> None:
    assert "Drafter step split" not in render(tmp_path, record())


def shaped(rec: dict[str, Any], arm: str, first_ms: float, repeat_ms: float) -> dict[str, Any]:
    """The arm's warm-up rounds are first uses at `first_ms`, its measured rounds repeats."""
    for r in [x for x in rec["runs"] if x["arm"] == arm and x["status"] == "ok"]:
        d = r["diagnostics"]
        log = d.get("rounds_log") or [{"offset": i, "accepted": 1, "proposed": 2, "drafted": [1, 2]}
                                      for i in range(10)]
        for i, e in enumerate(log):
            e.update(drafted=[1, 2], proposed=2, kv_len=20 + 2 * i, verify_ms=first_ms if r["warmup"] else repeat_ms,
                     first_use=bool(r["warmup"]))
        d["rounds_log"] = log
        d["mode"] = "speculative"
    return rec


def test_first_use_cost_is_measured_against_repeats_and_flagged() -> None:
    rec = shaped(record(), "block3-inexact", first_ms=80.0, repeat_ms=18.0)
    c = next(x for x in drafterstep.shape_costs(rec) if x.arm == "block3-inexact")
    assert c.width == 3 and c.first_median == 80.0 and c.repeat_median == 18.0
    assert c.excess_ms == pytest.approx(len(c.first) * 62.0)
    assert c.first_use_flagged
    # The measured runs' verify forward is the repeat cost: not flagged against a warm probe at it.
    rec["scaling"] = {"context_tokens": 64, "device": "Device(gpu, 0)", "widths": [
        {"T": 3, "median_ms": 17.0, "min_ms": 16.0, "max_ms": 18.0, "repeats": 7, "vs_T1": 2.0,
         "cold_median_ms": 79.0}]}
    c = next(x for x in drafterstep.shape_costs(rec) if x.arm == "block3-inexact")
    assert c.vs_probe == pytest.approx(18.0 / 17.0) and not c.probe_flagged


def test_a_first_use_share_without_decode_time_is_unknown_not_cleared(tmp_path: Path) -> None:
    rec = shaped(record(), "block3-inexact", first_ms=80.0, repeat_ms=18.0)
    for r in rec["runs"]:
        if r["arm"] == "block3-inexact" and r["warmup"]:
            r["diagnostics"].pop("decode_ms", None)
    c = next(x for x in drafterstep.shape_costs(rec) if x.arm == "block3-inexact")
    assert c.excess_ms and c.excess_share is None and c.first_use_flagged is None
    sec = render(tmp_path, rec).split("<summary>Verify cost by KV length: first use against repeat</summary>")[1].split("</details>")[0]
    assert "its share of decode time is unknown" in sec and "under the 5% flag" not in sec


def test_the_scaling_probe_of_another_target_is_not_compared() -> None:
    rec = shaped(record(), "block3-inexact", first_ms=80.0, repeat_ms=80.0)
    rec["suite"]["pairings"].append({"name": "big", "target": "elsewhere/big-8b"})
    rec["scaling"] = {"context_tokens": 64, "device": "Device(gpu, 0)", "pairing": "big", "widths": [
        {"T": 3, "median_ms": 18.0, "min_ms": 17.0, "max_ms": 19.0, "repeats": 7, "vs_T1": 2.0,
         "cold_median_ms": 83.0}]}
    c = next(x for x in drafterstep.shape_costs(rec) if x.arm == "block3-inexact")
    assert c.probe_warm_ms is None and c.vs_probe is None and not c.probe_flagged
    own = next(p["name"] for p in rec["suite"]["pairings"] if p["name"] != "big")
    rec["scaling"]["pairing"] = own
    c = next(x for x in drafterstep.shape_costs(rec) if x.arm == "block3-inexact")
    assert c.probe_flagged


def test_a_verify_forward_far_above_the_warm_probe_is_flagged(tmp_path: Path) -> None:
    rec = shaped(record(), "block3-inexact", first_ms=80.0, repeat_ms=80.0)
    rec["scaling"] = {"context_tokens": 64, "device": "Device(gpu, 0)", "widths": [
        {"T": 1, "median_ms": 9.0, "min_ms": 8.0, "max_ms": 10.0, "repeats": 7, "vs_T1": 1.0,
         "cold_median_ms": 70.0, "cold_min_ms": 60.0, "cold_max_ms": 75.0, "cold_vs_warm": 7.8},
        {"T": 3, "median_ms": 18.0, "min_ms": 17.0, "max_ms": 19.0, "repeats": 7, "vs_T1": 2.0,
         "cold_median_ms": 83.0, "cold_min_ms": 80.0, "cold_max_ms": 90.0, "cold_vs_warm": 4.6}]}
    c = next(x for x in drafterstep.shape_costs(rec) if x.arm == "block3-inexact")
    assert not c.first_use_flagged and c.probe_flagged
    md = render(tmp_path, rec)
    sec = md.split("<summary>Verify cost by KV length: first use against repeat</summary>")[1].split("</details>")[0]
    assert "4.44x the warm probe: **flagged**" in sec and "cold 83.000 ms" in sec
    scaling = md.split("<summary>Verify-forward cost scaling</summary>")[1].split("</details>")[0]
    assert mdtable.parse(scaling)[0][0][-3:] == ["cold median ms", "cold min-max ms", "cold vs warm"]
