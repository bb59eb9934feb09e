"""The report's figures, drawn from the committed records: each figure comes out exactly when the
record has its data, names the arms, marks contended runs exactly where they are, parses as SVG,
stays small, and is the same bytes every time it is drawn."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from harness_helpers import REPO

from harness.analyze import figuredata
from harness.analyze.figuredata import compare_figure_data, record_figure_data
from harness.core.schema import load_record
from harness.render import figures
from harness.render.figures import compare_figures, record_figures

REPORTS = REPO / "reports"
MTP = "20261205-084154-mtp-study-linux-cpu.json"
MTP_H200 = "20261205-032041-mtp-study-h200.json"
BLAS = "20261202-182230-cpu-blas-linux-cpu.json"
ALL = sorted(p.name for p in REPORTS.glob("*.json"))
SVG = "{http://www.w3.org/2000/svg}"
RECORD_FIGURES = {"ms-per-token-by-run", "round-split", "acceptance-by-position", "verify-ms-by-kv-length"}


@functools.cache
def _loaded(name: str) -> dict[str, Any]:
    p = REPORTS / name
    return load_record(json.loads(p.read_text()), str(p))


def rec(name: str) -> dict[str, Any]:
    """A committed record, loaded; a copy the test may change."""
    return copy.deepcopy(_loaded(name))


def drawn(record: dict[str, Any]) -> dict[str, figures.Figure]:
    return {f.name: f for f in record_figures(record_figure_data(record))}


def root(svg: str) -> ET.Element:
    r = ET.fromstring(svg)
    assert r.tag == f"{SVG}svg"
    return r


def text(svg: str) -> str:
    """Every piece of text the SVG shows (text stays text: svg.fonttype none)."""
    return "\n".join(t for el in root(svg).iter(f"{SVG}text") for t in el.itertext())


def ids(svg: str, prefix: str) -> list[str]:
    return [el.get("id") or "" for el in root(svg).iter() if (el.get("id") or "").startswith(prefix)]


def measured(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in record["runs"] if not r.get("warmup")]


def test_mtp_study_draws_every_figure_naming_its_arms() -> None:
    r = rec(MTP)
    figs = drawn(r)
    assert set(figs) == RECORD_FIGURES
    arms = [a["name"] for a in r["suite"]["arms"]]
    speculative = sorted({x["arm"] for x in measured(r) if x["diagnostics"].get("mode") == "speculative"})
    assert speculative and "classic" not in speculative
    runs_text = text(figs["ms-per-token-by-run"].svg)
    assert all(a in runs_text for a in arms)
    assert "ms/token" in runs_text and "run in session order" in runs_text and "6 warm-up runs excluded" in runs_text
    split_text = text(figs["round-split"].svg)
    assert all(a in split_text for a in arms)
    assert "ms per round" in split_text and "verify forward (T=K)" in split_text
    assert all(a in text(figs["acceptance-by-position"].svg) for a in speculative)
    kv_text = text(figs["verify-ms-by-kv-length"].svg)
    assert all(a in kv_text for a in speculative) and "KV length (tokens)" in kv_text and "first use" in kv_text
    for f in figs.values():
        assert f.title and "\n" not in f.title
        assert len(f.svg.encode()) < 150_000, (f.name, len(f.svg))


def test_drawing_a_record_twice_gives_the_same_bytes() -> None:
    first = [(f.name, f.svg) for f in record_figures(record_figure_data(rec(MTP)))]
    again = [(f.name, f.svg) for f in record_figures(record_figure_data(rec(MTP)))]
    assert first == again
    assert all("<dc:date>" not in svg for _, svg in first)


def test_another_process_draws_the_same_bytes() -> None:
    """Nothing in an SVG comes from the process: ids are salted, not random, and no order
    depends on Python's string hashing."""
    code = ("import json, hashlib; from harness.core.schema import load_record; "
            "from harness.analyze.figuredata import record_figure_data; "
            "from harness.render.figures import record_figures; "
            f"p = {str(REPORTS / MTP)!r}; "
            "figs = record_figures(record_figure_data(load_record(json.load(open(p)), p))); "
            "print(hashlib.sha256(''.join(f.svg for f in figs).encode()).hexdigest())")
    here = hashlib.sha256("".join(f.svg for f in record_figures(record_figure_data(rec(MTP)))).encode()).hexdigest()
    for seed in ("1",):   # this process's hash seed is random: another one differs from it
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed})
        assert out.stdout.strip() == here


def test_a_long_busy_session_stays_small() -> None:
    """Hundreds of runs, every other one contended and after a quiet-wait timeout: the marks
    become ticks along the axis (one path), so the SVG stays well under 150 KB."""
    r = rec(MTP)
    runs = []
    for k in range(8):
        for i, x in enumerate(r["runs"]):
            if k and x.get("warmup"):
                continue
            y = copy.deepcopy(x)
            y["index"] = x["index"] + k * len(r["runs"])
            y["marks"] = ["contended", "quiet_wait_timeout"] if i % 2 else []
            y.pop("diagnostics", None)
            runs.append(y)
    r["runs"] = runs
    f = figures.runs_figure(record_figure_data(r))
    assert len([x for x in runs if not x.get("warmup")]) > 2 * figures.MANY_RUNS
    assert ids(f.svg, "contended-runs") and ids(f.svg, "quiet-timeout-runs")
    assert "contended runs ticked at the bottom" in f.title
    assert len(f.svg.encode()) < 150_000


@pytest.mark.parametrize("name", ALL)
def test_contended_and_quiet_timeout_marks_exactly_where_runs_have_them(name: str) -> None:
    r = rec(name)
    fd = record_figure_data(r)
    svg = figures.runs_figure(fd).svg
    runs = [x for x in measured(r) if x.get("status") == "ok"]
    assert bool(ids(svg, "contended-runs")) == any("contended" in (x.get("marks") or []) for x in runs)
    assert bool(ids(svg, "quiet-timeout-runs")) == any("quiet_wait_timeout" in (x.get("marks") or []) for x in runs)
    assert ("contended run" in text(svg)) == bool(ids(svg, "contended-runs"))
    assert not ids(svg, "failed-runs")


def test_cpu_blas_marks_its_contended_runs_and_has_no_kv_figure() -> None:
    """cpu-blas ran on a busy host (22 contended, 17 quiet-wait timeouts) and its engine logged
    no KV length per round: the figure it cannot have is left out, not drawn empty."""
    figs = drawn(rec(BLAS))
    assert set(figs) == RECORD_FIGURES - {"verify-ms-by-kv-length"}
    svg = figs["ms-per-token-by-run"].svg
    assert ids(svg, "contended-runs") and ids(svg, "quiet-timeout-runs")
    assert "contended runs circled" in figs["ms-per-token-by-run"].title


def test_a_failed_run_is_marked_and_warm_ups_are_left_out() -> None:
    r = rec(MTP)
    victim = measured(r)[4]
    victim.update(status="failed", ms_per_token=None)
    fd = record_figure_data(r)
    warm = {x["index"] for x in r["runs"] if x.get("warmup")}
    points = [p for s in fd.runs for p in s.points]
    assert len(points) == len(measured(r)) and not warm & {p.index for p in points}
    assert [p.index for p in points if p.failed] == [victim["index"]]
    svg = figures.runs_figure(fd).svg
    assert ids(svg, "failed-runs") and "failed run" in text(svg)


def test_an_engine_with_its_own_phase_names_gets_them_in_the_split() -> None:
    """The split draws whatever phases the engine reports: none of specdec's names are assumed."""
    r = rec(MTP)
    for x in r["runs"]:
        d = x.get("diagnostics") or {}
        if d.get("phase_ms"):
            d["phase_ms"] = {f"stage-{k[::-1]}": v for k, v in d["phase_ms"].items()}
    for e in r["suite"]["engines"].values():
        e["phases"], e["phase_labels"] = [], {}
    fd = record_figure_data(r)
    assert {p for p, _ in fd.phases} == {"stage-kcolb_tfard", "stage-drawrof_yfirev", "stage-kooh_tpecca",
                                         "stage-ezilanif_yfirev", "stage-pets_tegrat", "stage-laudiser"}
    split = text(figures.split_figure(fd).svg)
    assert "stage-drawrof_yfirev" in split and "verify forward" not in split
    assert all(a["name"] in split for a in r["suite"]["arms"])


def test_a_record_without_phase_acceptance_or_kv_data_draws_only_its_runs() -> None:
    r = rec(MTP)
    for x in r["runs"]:
        d = x.get("diagnostics") or {}
        for k in ("phase_ms", "rounds_log", "accepted_by_position", "proposed_by_position"):
            d.pop(k, None)
    fd = record_figure_data(r)
    assert not fd.splits and not fd.kv and not fd.acceptance
    assert [f.name for f in record_figures(fd)] == ["ms-per-token-by-run"]


def test_acceptance_counts_first_measured_run_per_prompt_with_intervals() -> None:
    r = rec(MTP)
    fd = record_figure_data(r)
    a = next(x for x in fd.acceptance if x.arm == "mtp-block4")
    firsts = {}
    for x in measured(r):
        if x["arm"] == "mtp-block4":
            firsts.setdefault(x["prompt"], x)
    assert a.runs == len(firsts) == 2
    assert list(a.proposed) == [sum(x["diagnostics"]["proposed_by_position"][i] for x in firsts.values())
                                for i in range(3)]
    assert all(lo <= s <= hi for s, (lo, hi) in zip(a.share, a.ci))
    assert fd.acceptance_runs == "first measured run per prompt"


def test_kv_curves_split_first_use_from_repeat() -> None:
    fd = record_figure_data(rec(MTP))
    c = {(x.arm, x.kind): x for x in fd.kv}
    first, rep = c[("mtp-block4", figuredata.FIRST_USE)], c[("mtp-block4", figuredata.REPEAT)]
    assert first.width == rep.width == 4
    assert (first.rounds, rep.rounds) == (100, 605)   # drafterstep.shape_costs: 70 + 30, 350 + 255
    assert list(first.kv) == sorted(first.kv) and all(k % figuredata.KV_BIN == 0 for k in first.kv)


def test_compare_draws_ms_per_token_and_each_shared_component() -> None:
    a, b = rec(MTP), rec(MTP_H200)
    cd = compare_figure_data(a, b)
    assert cd is not None
    figs = {f.name: f for f in compare_figures(cd)}
    # Across hosts: no paired change figure (the comparison gives speedups there, not verdicts).
    assert set(figs) == {"compare-ms-per-token", "compare-round-split", "compare-token-split"}
    ms = text(figs["compare-ms-per-token"].svg)
    assert all(x["name"] in ms for x in a["suite"]["arms"])
    assert f"before: {cd.before}" in ms and f"after: {cd.after}" in ms and "linux-cpu" in cd.before
    assert "min-max" in figs["compare-ms-per-token"].title
    rounds = text(figs["compare-round-split"].svg)
    assert "round total" in rounds and "verify forward (T=K)" in rounds and "mtp-block4" in rounds
    assert [f.svg for f in compare_figures(compare_figure_data(a, b))] == [f.svg for f in figs.values()]
    assert all(len(f.svg.encode()) < 150_000 for f in figs.values())


def test_compare_without_phases_still_shows_ms_per_token() -> None:
    """An engine that reports no phases: the comparison still shows the change in ms/token."""
    a, b = rec(MTP), rec(MTP_H200)
    for x in b["runs"]:
        (x.get("diagnostics") or {}).pop("phase_ms", None)
    cd = compare_figure_data(a, b)
    assert cd is not None and cd.components == ()
    assert [f.name for f in compare_figures(cd)] == ["compare-ms-per-token"]


def test_compare_draws_each_arms_paired_change_with_its_interval() -> None:
    """A planted step: every run of the after record 1.3x slower (the before record's own runs):
    each arm's change sits at +30% with an interval clear of zero, labelled with its verdict."""
    a = rec(MTP)
    for x in a["runs"]:
        x["marks"] = [m for m in (x.get("marks") or []) if m != "contended"]
    b = copy.deepcopy(a)
    for x in b["runs"]:
        if isinstance(x.get("ms_per_token"), (int, float)):
            x["ms_per_token"] *= 1.3
    cd = compare_figure_data(a, b)
    assert cd is not None and {c.arm for c in cd.changes} == {x["name"] for x in a["suite"]["arms"]}
    for c in cd.changes:
        assert c.change == pytest.approx(0.3, abs=1e-9) and c.lo is not None and c.lo > 0, c
        assert c.verdict == "slower", c
    svg = text(next(f for f in compare_figures(cd) if f.name == "compare-ms-per-token-change").svg)
    assert all(f"{c.arm} (slower)" in svg for c in cd.changes) and "95% interval" in svg


def test_compare_of_records_without_runs_is_none() -> None:
    a, b = rec(MTP), rec(MTP_H200)
    a["runs"], b["runs"] = [], []
    assert compare_figure_data(a, b) is None


def test_every_committed_record_has_its_figures_and_they_are_current() -> None:
    """Each committed record's report folder holds at least its runs figure, every figure an SVG
    well under 150 KB; and one record's committed figures are what the code draws now (a renderer
    change shows as a diff of reports/: scripts/reproduce/rerender_reports.sh)."""
    for name in ALL:
        folder = REPORTS / name.removesuffix(".json")
        assert (folder / "ms-per-token-by-run.svg").is_file(), name
        for f in folder.glob("*.svg"):
            root(f.read_text())
            assert f.stat().st_size < 150_000, f
    default = next(n for n in ALL if "default" in n)
    for name, fig in drawn(rec(default)).items():
        committed = (REPORTS / default.removesuffix(".json") / f"{name}.svg").read_text()
        assert committed.startswith(fig.svg), name


def test_split_says_which_arm_decoded_classic() -> None:
    """cpu-blas's block3 asked to speculate and its gate declined: its bar sits with classic
    decode, labelled so; the arms that speculated are not."""
    split = text(drawn(rec(BLAS))["round-split"].svg)
    assert "block3 · code/main-argv (decoded classic)" in split
    assert "classic · code/main-argv (decoded classic)" not in split
    assert "block3-inexact · code/main-argv (decoded classic)" not in split


def test_kv_legend_names_only_the_kinds_drawn() -> None:
    """On the H200 random-weights record every verify round was a first use: no repeat line, so
    no repeat entry in the key."""
    kv = text(drawn(rec("20261205-021945-random-8b-spec-cudnn-on-h200.json"))["verify-ms-by-kv-length"].svg)
    assert "first use (a KV length" in kv and "repeat of a shape" not in kv and "0 repeat rounds" in kv
    assert "repeat of a shape" in text(drawn(rec(MTP))["verify-ms-by-kv-length"].svg)


def test_an_engine_without_diagnostics_or_a_record_without_measured_runs() -> None:
    """A tok/s-only command engine reports no diagnostics: its runs are still drawn. A record
    that stopped after its warm-ups has nothing to draw: no figure, not an empty one."""
    r = rec(MTP)
    for x in r["runs"]:
        del x["diagnostics"]
    assert [f.name for f in record_figures(record_figure_data(r))] == ["ms-per-token-by-run"]
    r["runs"] = [x for x in r["runs"] if x.get("warmup")]
    assert record_figures(record_figure_data(r)) == []
