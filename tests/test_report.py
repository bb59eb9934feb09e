"""`harness report`: golden Markdown for frozen real records, structure, numbers, labels, bad input.

The fixtures are two real sessions of tests/fixtures/report/suite.toml on a 2-core CPU host
(see that file). Regenerate the golden files after an intended change with
UPDATE_GOLDEN=1 python -m pytest tests/test_report.py, and read the diff before committing.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
from harness_helpers import REPO, md_section, one_line, run_cli, write_record

from harness.analyze import stats
from harness.analyze.labels import label_run
from harness.ci import reportfiles as report_cli
from harness.cli.report import backfill
from harness.collect.record import read_record
from harness.core.schema import Gate
from harness.render import mdtable
from harness.render import reportcontext as rp

FX = REPO / "tests" / "fixtures" / "report"
RECORD = "tests/fixtures/report/record.json"
AFTER = "tests/fixtures/report/record-after.json"
NO_USER_TEMPLATES = REPO / "tests" / "fixtures" / "report" / "no-such-templates"
NOT_SHIPPING = "not a shipping configuration"
BACKFILL = backfill()   # what the two schema-1 records lack, as `harness report` reads it


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    # Record paths in the golden files are relative to the repository root.
    monkeypatch.chdir(REPO)


def _relabel(run: dict[str, Any]) -> None:
    """A record's run dict labelled again after a test changed its overrides or gate."""
    lab = label_run(run.get("overrides") or {}, msgspec.convert(run.get("gate") or {}, Gate), run.get("status") == "failed")
    run["shipping"], run["label"] = lab.shipping, lab.text


def render(path: str, compare: str | None = None, template: str = "record") -> str:
    return rp.render(report_cli.context_for(path, compare, BACKFILL), template, user_dir=NO_USER_TEMPLATES)


def load(path: str | Path) -> dict[str, Any]:
    return json.loads((REPO / path).read_text())


write = write_record
section = md_section


def table_rows(md: str) -> list[list[list[str]]]:
    return mdtable.parse(md)


def details(md: str, summary: str) -> str:
    """The body of the appendix's <details> block whose summary starts with `summary`."""
    m = re.search(rf"<details><summary>{re.escape(summary)}[^<]*</summary>\n(.*?)</details>", md, re.S)
    assert m, f"no details block {summary!r}"
    return m.group(1)


def first_screen(md: str) -> str:
    """Everything before the appendix."""
    return md.split("\n## Appendix\n", 1)[0]


def arms_rows(md: str) -> dict[str, dict[str, str]]:
    t = table_rows(details(md, "Per-prompt figures"))[0]
    head = t[0]
    return {row[0]: dict(zip(head, row)) for row in t[1:]}


def assert_well_formed(md: str) -> None:
    tables = table_rows(md)
    assert tables, "no tables"
    for t in tables:
        assert len(t) >= 2, f"table without rows: {t}"
        assert all(len(row) == len(t[0]) for row in t), f"ragged table: {t}"


# --- golden -----------------------------------------------------------------------------

@pytest.mark.parametrize("name, args", [
    ("record.md", (RECORD, None)),
    ("compare.md", (RECORD, AFTER)),
])
def test_golden(name: str, args: tuple[str, str | None]) -> None:
    got = render(*args)
    golden = FX / name
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(got)
    assert got == golden.read_text(), f"{name} changed; rerun with UPDATE_GOLDEN=1 and read the diff"


# --- structure and numbers ---------------------------------------------------------------

def test_sections_in_order_and_tables_well_formed() -> None:
    md = render(RECORD)
    heads = re.findall(r"^## (.+)$", md, re.M)
    assert heads == ["Setup", "Round split", "Cost model", "Acceptance", "Limits of this record", "Appendix"]
    assert re.findall(r"<summary>([^<]+)</summary>", md) == [
        "Per-prompt figures (tok/s, spread, acceptance, unpaired ratio to classic)",
        "One override at a time (unpaired tok/s ratios)", "Round split per arm and prompt",
        "Drafter step: profiled against unprofiled", "Cost model detail", "Acceptance, paired A/B",
        "Byte identity", "Runs left out and flags on kept runs", "Full setup", "Reproducing"]
    assert "Verify-forward cost scaling" not in md      # the record has none: the section is omitted
    assert_well_formed(md)
    brief = {r[0]: r[1] for r in table_rows(section(md, "Setup"))[0][1:]}
    assert set(brief) == {"host", "build and commit", "harness and engine versions", "target", "drafter",
                          "prompt", "sampling"}
    setup = {r[0]: r[1] for r in table_rows(details(md, "Full setup"))[0][1:]}
    assert set(setup) >= set(brief) | {"load average during runs", "command", "exactness gate"}


def test_arms_table_numbers_come_from_the_runs() -> None:
    rec = load(RECORD)
    md = render(RECORD)
    rows = arms_rows(md)
    for arm in ("classic", "block3-inexact", "block3-dense"):
        runs = [r for r in rec["runs"] if r["arm"] == arm and not r["warmup"] and r["status"] == "ok"]
        tps = [r["decode_tokens_per_s"] for r in runs]
        assert rows[arm]["tok/s median"] == f"{stats.median(tps):.1f}"
        lo, hi = stats.min_max(tps)
        assert rows[arm]["min-max"] == f"{lo:.1f}-{hi:.1f}"
        if arm != "classic":
            acc = sum(r["diagnostics"]["accepted"] for r in runs) / sum(r["diagnostics"]["proposed"] for r in runs)
            assert rows[arm]["acceptance"] == f"{acc:.3f}"
    assert rows["classic"]["vs classic"] == "reference"
    assert rows["block3"]["acceptance"] == "declined (classic decode)"
    assert all(r["flags"].startswith("do not publish") for r in rows.values())   # a noisy 2-run session


def test_peak_memory_column_and_its_note_only_where_engines_reported_it(tmp_path: Path) -> None:
    assert "memory (+run)" not in render(RECORD)      # an older record renders as it did
    rec = load(RECORD)
    for r in rec["runs"]:
        if r["arm"] == "classic" and r["status"] == "ok":
            r["diagnostics"].update(peak_memory_bytes=30 * 2**20, resident_memory_bytes=25 * 2**20,
                                    model_memory_bytes=12 * 2**20)
    md = render(write(tmp_path, "r.json", rec))
    rows = arms_rows(md)
    assert rows["classic"]["memory (+run)"] == "17.0 MiB (+5.0)"    # its weights plus what it added
    assert rows["block3"]["memory (+run)"] == "-"
    assert "Memory is what an arm needs at its peak" in details(md, "Per-prompt figures")
    assert_well_formed(md)


def test_round_split_closes_and_sums() -> None:
    rec = load(RECORD)
    md = render(RECORD)
    split = details(md, "Round split per arm")
    m = re.search(r"\*\*block3-inexact\*\*\n\n(.*?)\n\nComponents close against the decode total to within ([0-9.]+)%", split, re.S)
    assert m and float(m.group(2)) < 0.01
    t = mdtable.parse(m.group(1))[0]
    runs = [r for r in rec["runs"] if r["arm"] == "block3-inexact" and not r["warmup"]]
    verify = sum(r["diagnostics"]["phase_ms"]["verify_forward"] for r in runs)
    rounds_ = sum(r["diagnostics"]["rounds"] for r in runs)
    row = next(r for r in t if r[0] == "verify forward (T=3)")
    assert row[1] == f"{verify:.2f}" and row[2] == f"{verify / rounds_:.3f}"
    shares = [float(r[3].rstrip("%")) for r in t[1:-1]]
    assert abs(sum(shares) - 100.0) < 0.3


def test_each_component_is_described_in_the_engines_words_only_where_it_gave_them(tmp_path: Path) -> None:
    rec = load(RECORD)
    for r in rec["runs"]:
        notes = r["diagnostics"].setdefault("phase_notes", {})
        notes["verify_forward"] = "the target over K positions, as this engine says"
        notes.pop("residual", None)
    split = details(render(write(tmp_path, "notes.json", rec)), "Round split per arm")
    assert "- verify forward (T=K): the target over K positions, as this engine says" in split
    assert "- residual:" not in split
    for r in rec["runs"]:
        r["diagnostics"].pop("phase_notes", None)
    assert "in the engine's own words" not in details(render(write(tmp_path, "none.json", rec)), "Round split per arm")


def test_profile_split_and_cost_model() -> None:
    md = render(RECORD)
    prof = details(md, "Drafter step: profiled against unprofiled")
    assert "unprofiled ms/round (block3-inexact)" in prof and "profiled ms/round (block3-profile)" in prof
    assert re.search(r"Profile mode costs [+-][0-9.]+% per round", prof)
    cost = section(md, "Cost model")
    assert "unknown peak" in cost                    # linux-cpu profile: no vendor figure, never a guess
    what_if = next(t for t in table_rows(cost) if t[0][0] == "scenario")
    names = [r[0] for r in what_if[1:]]
    assert names[0] == "measured" and "free drafter" in names and "verify-only ceiling" in names
    free = next(r for r in what_if if r[0] == "free drafter")
    assert free[1] == "0.000"
    assert "Break-even at the measured round" in cost
    assert "10,233,600" in cost                     # the embedded target's safetensors bytes


def test_known_peak_gives_an_efficiency(tmp_path: Path) -> None:
    rec = load(RECORD)
    rec["host"]["gpu"] = {"name": "NVIDIA H200", "nvidia": []}
    md = render(write(tmp_path, "h200.json", rec))
    cost = section(md, "Cost model")
    assert "4800 GB/s" in cost and "unknown peak" not in cost
    bw = next(t for t in table_rows(cost) if t[0][0] == "model")
    assert bw[1][4].endswith("%")


def test_acceptance_paired_and_unpaired() -> None:
    rec = load(RECORD)
    md = render(RECORD)
    a = section(md, "Acceptance")
    unpaired = table_rows(a)[0]
    first = next(r for r in rec["runs"] if r["arm"] == "block3-dense" and not r["warmup"])
    d = first["diagnostics"]
    lo, hi = stats.wilson_ci(d["accepted"], d["per_step_tested"])
    row = next(r for r in unpaired if r[0] == "block3-dense")
    assert row[2] == str(d["per_step_tested"]) and row[4] == f"[{lo:.4f}, {hi:.4f}]"
    assert "95% CI (Wilson)" in unpaired[0]
    ab = details(md, "Acceptance, paired A/B")
    assert "Paired, block3-inexact vs block3-dense" in a and "**block3-inexact vs block3-dense" in ab
    assert "block3-profile vs" not in a + ab and "vs block3-profile" not in a + ab   # profile mode repeats its twin's tokens
    m = re.search(r"\*\*block3-inexact vs block3-dense.*?\n\n(.*?)\n\n", ab, re.S)
    t = {r[0]: r[1] for r in mdtable.parse(m.group(1))[0][1:]}
    more_a, more_b = int(t["block3-inexact accepted more"]), int(t["block3-dense accepted more"])
    assert t["sign test p (exact, two-sided)"] == f"{stats.sign_test(more_a, more_b):.3f}"


def test_paired_matches_rounds_by_offset() -> None:
    from harness.analyze.acceptance import paired
    from harness.core.runs import as_run
    log_a = [{"offset": 0, "drafted": [1, 2], "accepted": 2}, {"offset": 3, "drafted": [4, 5], "accepted": 0},
             {"offset": 4, "drafted": [6, 7], "accepted": 1}]
    log_b = [{"offset": 0, "drafted": [1, 2], "accepted": 2}, {"offset": 3, "drafted": [4, 9], "accepted": 1},
             {"offset": 5, "drafted": [6, 7], "accepted": 1}]

    def runs(log: list[dict]) -> dict:
        return {"p": as_run({"index": 0, "status": "ok", "diagnostics": {"rounds_log": log}})}
    r = paired("a", runs(log_a), "b", runs(log_b))
    assert (r.matched, r.same_proposal, r.differ, r.a_more, r.b_more) == (2, 1, 1, 0, 1)
    assert (r.accepted_a, r.accepted_b) == (2, 3) and r.sign_p == pytest.approx(1.0)
    # An engine that logs only counts (mlx-lm: "proposed") has no proposal to compare.
    counted = [[{**e, "proposed": len(e["drafted"]), "drafted": None} for e in log] for log in (log_a, log_b)]
    assert paired("a", runs(counted[0]), "b", runs(counted[1])).same_proposal is None


def _change(before: list[float], after: list[float], floor: float = 0.0, component: str = "c"):
    from harness.analyze.compare import Cell, ComponentChange
    from harness.analyze.rounds import median_range
    return ComponentChange("x", "p", component, "round", Cell(*median_range(before)), Cell(*median_range(after)),
                           tuple(before), tuple(after), floor)


def test_noise_rule() -> None:
    # "noise" only for a resolved reading: the check could see the threshold and its interval holds 0.
    steady = [10.0, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98, 10.03]
    flat = _change(steady, [x * (1.0 + 0.001 * (-1) ** i) for i, x in enumerate(steady)])
    assert flat.judged.detectable <= 0.10 and flat.judged.lo <= 1.0 <= flat.judged.hi
    assert flat.verdict == "noise"
    apart = _change([10.0, 10.2, 9.9], [8.0, 8.1, 7.95])      # every pair ~20% faster
    assert apart.verdict == "faster" and apart.change == pytest.approx(-0.2)
    slower = _change([10.0, 10.2, 9.9], [12.0, 12.3, 11.8])
    assert slower.verdict == "slower"


def test_an_unresolved_change_is_inconclusive_with_its_smallest_detectable_change() -> None:
    from harness.analyze.design import detectable_change
    from harness.render.comparesec import change_text
    # The old min-max rule called this "noise" (11.5 lies inside the before range); two or three
    # noisy runs cannot tell, so it is inconclusive, with the number from harness.analyze.design.
    c = _change([10.0, 12.0, 9.0], [11.5, 11.0, 13.0])
    assert c.verdict == "inconclusive"
    det = c.judged.detectable
    assert det == pytest.approx(detectable_change(c.judged.sd_log, 3, c.design)) and det > 0.10
    text = change_text(c)
    assert f"inconclusive (smallest detectable {det:.1%})" in text and "noise" not in text
    one = _change([10.0], [11.0])                               # one run a side: no spread, no number
    assert one.verdict == "inconclusive" and "smallest detectable unknown" in change_text(one)
    md = render(RECORD, AFTER)                                  # 2 runs per side: nothing resolves
    ba = section(md, "Before and after")
    detail = md.split("\n## Appendix\n", 1)[1]   # each component's table, folded
    t = next(t for t in table_rows(detail) if t[0][:2] == ["component", "before ms/round"])
    assert any("inconclusive (smallest detectable " in r[3] for r in t[1:])
    assert not re.search(r"\bnoise\b", "\n".join(r[3] for tb in table_rows(ba) for r in tb[1:] if len(r) > 3))
    assert "no component change is resolved as faster or slower" in md.split("\n## Setup")[0]


def test_a_tiny_absolute_change_is_below_the_floor() -> None:
    from harness.analyze import compare as cmp
    from harness.render.comparesec import change_text
    # A 3 us residual moving +23.5%, every pair alike (resolved "slower" by the check alone).
    tiny = _change([0.0030, 0.0031, 0.0029], [0.0037, 0.00383, 0.00358], cmp.floor_ms(0.5, 0.4), "residual")
    assert tiny.judged.verdict == "worse" and tiny.change == pytest.approx(0.235, abs=0.01)
    # 0.01 ms, or 1% of the larger side's round, whichever is larger.
    assert cmp.floor_ms(0.5, 0.4) == cmp.ABS_FLOOR_MS == 0.01 and cmp.floor_ms(7.0, 8.0) == pytest.approx(0.08)
    assert tiny.verdict == cmp.BELOW_FLOOR and not tiny.real
    assert "below the floor" in change_text(tiny) and "slower" not in change_text(tiny)
    # In a report: block3-inexact's accept hook, 0.014 -> 0.016 ms/round (+15.0%), was "slower".
    ba = render(RECORD, AFTER).split("\n## Appendix\n", 1)[1]   # the per-component tables
    sub = ba.split("### block3-inexact\n", 1)[1].split("### ", 1)[0]
    rows = {r[0]: r[3] for r in table_rows(sub)[0][1:]}
    assert rows["accept hook"].startswith("+15.0%, below the floor") and "slower" not in rows["accept hook"]
    assert "Floor: 0.070 ms/round (the larger of 0.01 ms and 1% of the round" in sub


def test_a_uniform_change_on_the_same_host_is_resolved(tmp_path: Path) -> None:
    # Its runs' contended marks taken off (a quiet host): past the suite's share of contended
    # runs no change is resolved (tests/test_compare_phaseless.py).
    before = load(RECORD)
    for r in before["runs"]:
        r["marks"] = [m for m in (r.get("marks") or []) if m != "contended"]
    after = load(AFTER)
    after["runs"] = copy.deepcopy(before["runs"])
    for r in after["runs"]:                 # every run of the before record, twice as fast
        d = r.get("diagnostics") or {}
        if d.get("decode_ms"):
            d["decode_ms"] /= 2
            d["phase_ms"] = {k: v / 2 for k, v in d["phase_ms"].items()}
    ba = render(write(tmp_path, "quiet.json", before), write(tmp_path, "fast.json", after)).split(
        "\n## Appendix\n", 1)[1]   # the per-component tables
    sub = ba.split("### block3-refblas\n", 1)[1].split("### ", 1)[0]
    rows = {r[0]: r[3] for r in table_rows(sub)[0][1:]}
    assert rows["round total"].endswith("faster") and rows["round total"].startswith("-50.0%")
    assert "below the floor" in rows["residual"]


@pytest.mark.parametrize("var, value", [("SPECDEC_INJECT_WORK", "0.5"), ("SPECDEC_ALLOW_INEXACT", "1")])
def test_an_override_only_in_the_compared_record_is_named(tmp_path: Path, var: str, value: str) -> None:
    def classic_only(rec: dict[str, Any]) -> dict[str, Any]:
        rec["suite"]["arms"] = [a for a in rec["suite"]["arms"] if a["name"] == "classic"]
        rec["runs"] = [r for r in rec["runs"] if r["arm"] == "classic"]
        return rec
    a, b = classic_only(load(RECORD)), classic_only(load(AFTER))
    for r in b["runs"]:                     # exported in B's shell: in every run's overrides, not the suite
        r["overrides"] = {**(r.get("overrides") or {}), var: value}
        _relabel(r)
    md = render(write(tmp_path, "a.json", a), write(tmp_path, "b.json", b))
    assert "Every arm is a shipping configuration" not in md        # A alone is; B is not
    both = ("In the before record, every arm is a shipping configuration; in the after record, "
            f"1 of 1 arm is {NOT_SHIPPING} (classic).")
    setup = {r[0]: r[1] for r in table_rows(details(md, "Full setup"))[0][1:]}
    assert setup["exactness gate"].endswith("Compared: in" + both[2:])
    ba = section(md, "Before and after")
    t = next(t for t in table_rows(ba) if t[0][0] == "arm")
    assert t[0] == ["arm", "before: overrides in force", "before: configuration", "after: overrides in force",
                    "after: configuration"]
    assert t[1] == ["classic", "none", "shipping configuration", f"{var}={value} (exported)", NOT_SHIPPING]
    assert f"classic ran under different overrides: {var}={value} in the after record only (" in ba
    assert "exported, not set by the suite" in ba


def test_an_override_on_both_sides_says_which_side_exported_it(tmp_path: Path) -> None:
    a, b = load(RECORD), load(AFTER)
    for rec in (a, b):
        rec["suite"]["arms"] = [x for x in rec["suite"]["arms"] if x["name"] == "classic"]
        rec["runs"] = [r for r in rec["runs"] if r["arm"] == "classic"]
    # Before: exported in the shell; after: set by the suite's arm.
    next(x for x in b["suite"]["arms"])["env"] = {"SPECDEC_INJECT_WORK": "0.2"}
    for rec, value in ((a, "0.5"), (b, "0.2")):
        for r in rec["runs"]:
            r["overrides"] = {**(r.get("overrides") or {}), "SPECDEC_INJECT_WORK": value}
            _relabel(r)
    ba = section(render(write(tmp_path, "a.json", a), write(tmp_path, "b.json", b)), "Before and after")
    line = next(x for x in ba.splitlines() if x.startswith("classic ran under different overrides"))
    assert "SPECDEC_INJECT_WORK=0.5 in the before record, SPECDEC_INJECT_WORK=0.2 in the after record (" in line
    before, after = line.split("in the before record: ", 1)[1].split("; in the after record: ", 1)
    assert "exported, not set by the suite" in before and "exported" not in after.split(")")[0]


# --- shipping labels ---------------------------------------------------------------------

def test_override_says_not_shipping_everywhere() -> None:
    md = render(RECORD)
    head = md.split("\n## Setup")[0]
    assert "| not shipping: SPECDEC_ALLOW_INEXACT=1, SPECDEC_QUANTIZE_DRAFTER=0 |" in head
    setup = {r[0]: r[1] for r in table_rows(details(md, "Full setup"))[0][1:]}
    gate = setup["exactness gate"]
    assert f"block3-inexact is {NOT_SHIPPING}: SPECDEC_ALLOW_INEXACT=1" in gate
    assert "Only classic is a shipping configuration" in gate
    assert "declined" in gate and "1001 of 4096 logit bytes" in gate
    rows = arms_rows(md)
    for arm in ("block3", "block3-inexact", "block3-profile", "block3-dense", "block3-refblas"):
        assert rows[arm]["configuration"].startswith(NOT_SHIPPING), arm
    assert rows["classic"]["configuration"] == "shipping configuration"
    assert "> exactness probe FAILED but SPECDEC_ALLOW_INEXACT is set" in md   # the probe quoted
    assert any("Overrides in force" in ln for ln in section(md, "Limits of this record").splitlines())


def test_shipping_only_record(tmp_path: Path) -> None:
    rec = load(RECORD)
    rec["suite"]["arms"] = [a for a in rec["suite"]["arms"] if a["name"] == "classic"]
    rec["runs"] = [r for r in rec["runs"] if r["arm"] == "classic"]
    md = render(write(tmp_path, "ship.json", rec))
    assert NOT_SHIPPING not in md.lower()
    assert "Every arm is a shipping configuration" in md


def test_an_ungated_engine_is_said_to_be_unchecked(tmp_path: Path) -> None:
    rec = load(RECORD)
    arm = "block3"
    for r in rec["runs"]:
        if r["arm"] == arm:  # as the stock mlx-lm adapter records a speculative run, no override
            r["gate"] = {**r["gate"], "outcome": "not_applicable", "engaged": True}
            r["overrides"] = {}
            _relabel(r)
    md = render(write(tmp_path, "ungated.json", rec))
    assert f"{arm} ran in an engine with no exactness gate" in md
    assert "nothing checked the output against classic decode" in md


def test_an_incomplete_record_says_what_it_lacks(tmp_path: Path) -> None:
    rec = load(RECORD)
    rec["complete"] = False
    rec["planned_runs"] = len(rec["runs"])  # every run there: the session stopped after them
    md = render(write(tmp_path, "all-runs.json", rec))
    n = len(rec["runs"])
    assert f"its session stopped after all {n} planned runs, before the steps that follow them" in md
    assert f"{n} of {n} planned runs" not in md
    rec["planned_runs"] = len(rec["runs"]) + 4
    md = render(write(tmp_path, "some-runs.json", rec))
    assert f"incomplete ({len(rec['runs'])} of {len(rec['runs']) + 4} planned runs): finish it with harness run --resume" in md


# --- comparisons --------------------------------------------------------------------------

def test_before_after_table() -> None:
    md = render(RECORD, AFTER)
    ba = section(md, "Before and after")
    detail = md.split("\n## Appendix\n", 1)[1]   # each component's table, folded
    t = next(t for t in table_rows(detail) if t[0][:2] == ["component", "before ms/round"])
    assert t[0] == ["component", "before ms/round", "after ms/round", "change (paired, 95% interval)"]
    assert all(re.search(r", (noise|faster|slower|inconclusive \(smallest detectable [0-9.]+%\)|"
                         r"below the floor \(.*\))$", r[3]) for r in t[1:])
    assert "Of 30 component changes: " in ba and "Acceptance A/B" in detail and "Acceptance A/B" not in ba
    assert_well_formed(md)


def test_a_before_and_after_lists_environment_differences_first(tmp_path: Path) -> None:
    after = load(AFTER)
    after["host"]["mlx"]["mlx"] = "9.9.9"
    md = render(RECORD, write(tmp_path, "after.json", after))
    body = section(md, "Before and after")
    # After the finding, before anything else.
    assert body.lstrip().split("\n\n")[1].startswith("Environment: 1 difference, listed first: mlx ")
    assert re.search(r"^\| mlx \| [^|]+ \| 9\.9\.9 \|$", body, re.M), body
    assert body.index("Environment:") < body.index("Before: ")


def test_cross_host_table(tmp_path: Path) -> None:
    rec = load(RECORD)
    rec["host"]["os"]["hostname"] = "other-host"
    for r in rec["runs"]:        # host B: this record, twice as fast in every component (made up)
        d = r["diagnostics"]
        d["decode_ms"] /= 2
        d["phase_ms"] = {k: v / 2 for k, v in d["phase_ms"].items()}
    md = render(RECORD, write(tmp_path, "b.json", rec))
    x = section(md, "Cross-host comparison")
    detail = md.split("\n## Appendix\n", 1)[1]   # each component's table, folded
    t = next(t for t in table_rows(detail) if t[0][0] == "component" and t[0][-1] == "speedup")
    assert t[0][1].startswith("A: linux-cpu vm") and t[0][2].startswith("B: linux-cpu other-host")
    # Each host's median with its min-max: "1.234 (1.100-1.400)".
    cell = re.compile(r"^(\d+\.\d{3}) \((\d+\.\d{3})-(\d+\.\d{3})\)$")
    for r in t[1:]:
        for c in (r[1], r[2]):
            m = cell.match(c)
            assert m and float(m[2]) <= float(m[1]) <= float(m[3]), c
    med = {r[0]: (float(cell.match(r[1])[1]), float(cell.match(r[2])[1])) for r in t[1:]}
    assert all(r[3] == ("2.00x, below the floor" if med[r[0]][0] - med[r[0]][1] < 0.05 else "2.00x") for r in t[1:])
    assert "Each host's median ms/round over its measured runs, their min-max in brackets" in detail
    assert "is in the appendix" in x
    assert any(r[3] == "2.00x" for r in t[1:]) and any(r[3].endswith("below the floor") for r in t[1:])
    assert "Before and after" not in md
    assert_well_formed(md)


def test_index_newest_first(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    old, new = load(RECORD), load(AFTER)
    old["created"], new["created"] = "2026-01-01T00:00:00+00:00", "2026-06-01T00:00:00+00:00"
    write(reports, "old.json", old)
    write(reports, "new.json", new)
    (reports / "new.md").write_text("rendered")
    (reports / "notes.json").write_text('{"kind": "something else"}')
    r = run_cli("report", "--index", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "skipped" in r.stderr and "notes.json" in r.stderr
    md = (reports / "README.md").read_text()
    t = mdtable.parse(md)[0]
    assert t[0] == ["date", "record", "host", "headline", "shipping status"]
    assert [row[0] for row in t[1:]] == ["2026-06-01", "2026-01-01"]
    assert "[new.md](new.md)" in t[1][1] and "not rendered" in t[2][1]
    assert all(NOT_SHIPPING in row[4] for row in t[1:])
    assert_well_formed(md)


# --- templates, CLI, bad input ------------------------------------------------------------

def test_user_template_wins(tmp_path: Path) -> None:
    (tmp_path / "reports" / "templates").mkdir(parents=True)
    (tmp_path / "reports" / "templates" / "record.md.j2").write_text("custom: {{ title }}\n")
    r = run_cli("report", str(REPO / RECORD), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "custom: report-fixture on linux-cpu, 2026-12-02\n"


def test_cli_writes_out_file(tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    r = run_cli("report", str(REPO / RECORD), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("# report-fixture on linux-cpu")


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    rec = load(RECORD)
    other = copy.deepcopy(rec)
    other["schema_version"] = 99
    assert "schema_version 99" in one_line(run_cli("report", write(tmp_path, "v99.json", other), cwd=tmp_path))
    # A field of the wrong type is named by its path, in one line.
    typed = copy.deepcopy(rec)
    typed["runs"][3]["diagnostics"]["rounds"] = "four"
    line = one_line(run_cli("report", write(tmp_path, "typed.json", typed), cwd=tmp_path))
    assert "$.runs[3].diagnostics.rounds" in line and "Expected `int | null`" in line
    text = (REPO / RECORD).read_text()
    (tmp_path / "cut.json").write_text(text[: len(text) // 2])
    assert "not valid JSON" in one_line(run_cli("report", str(tmp_path / "cut.json"), cwd=tmp_path))
    pairing = copy.deepcopy(rec)
    pairing["suite"]["pairings"][0]["target"] = "/models/another-target"
    line = one_line(run_cli("report", str(REPO / RECORD), "--compare",
                                    write(tmp_path, "p.json", pairing), cwd=tmp_path))
    assert "different pairings" in line and "another-target" in line
    assert "not found" in one_line(run_cli("report", str(REPO / RECORD), "--template", "nope", cwd=tmp_path))
    assert "needs a RECORD" in one_line(run_cli("report", cwd=tmp_path))
    assert "no such file" in one_line(run_cli("report", "missing.json", cwd=tmp_path))


def test_scaling_section_when_the_record_has_one(tmp_path: Path) -> None:
    rec = load(RECORD)
    rec["scaling"] = {"context_tokens": 512, "device": "Device(cpu, 0)", "widths": [
        {"T": 1, "median_ms": 2.0, "min_ms": 1.9, "max_ms": 2.2, "repeats": 7, "vs_T1": 1.0},
        {"T": 3, "median_ms": 3.0, "min_ms": 2.8, "max_ms": 3.3, "repeats": 7, "vs_T1": 1.5}]}
    md = render(write(tmp_path, "s.json", rec))
    t = table_rows(details(md, "Verify-forward cost scaling"))[0]
    assert t[0] == ["T (positions)", "median ms", "min-max ms", "vs T=1"] and t[2] == ["3", "3.000", "2.800-3.300", "1.50x"]


def test_engines_without_a_split_and_failed_runs(tmp_path: Path) -> None:
    """An mlx-lm-shaped arm (no phase split, rounds_log with counts only) and a failed run."""
    rec = load(RECORD)
    for r in rec["runs"]:
        if r["arm"] == "block3-dense":
            d = r["diagnostics"]
            d["phase_ms"], d["closure_error_ms"] = {}, None
            d["rounds_log"] = [{"offset": e["offset"], "proposed": len(e["drafted"]), "accepted": e["accepted"]}
                               for e in d["rounds_log"]]
    bad = next(r for r in rec["runs"] if r["arm"] == "block3-inexact" and not r["warmup"])
    bad.update(status="failed", error="EngineFailure: boom", diagnostics={}, decode_tokens_per_s=None,
               ms_per_token=None, token_ids=None, text=None)
    md = render(write(tmp_path, "odd.json", rec))
    assert "**block3-dense" not in details(md, "Round split per arm")
    assert "block3-dense" not in table_rows(section(md, "Round split"))[0][0]
    left_out, flagged = details(md, "Runs left out").split("Kept in the figures, flagged:")
    assert "failed: EngineFailure: boom" in left_out and "failed" not in flagged
    measured = sum(not r["warmup"] for r in rec["runs"])
    assert f"1 of {measured} measured runs failed (block3-inexact)" in first_screen(md).split("\n\n")[1]   # a caveat
    paired = details(md, "Acceptance, paired A/B")
    assert "not logged" in paired            # identical-proposal share needs drafted ids
    assert_well_formed(md)


@pytest.mark.parametrize("path", sorted((REPO / "reports").glob("*.json")), ids=lambda p: p.name)
def test_every_committed_record_renders_byte_identically_to_its_committed_markdown(path: Path, monkeypatch) -> None:
    from harness.collect.files import marked
    # The reports/ Markdown was rendered by `harness report`; a refactoring of the renderer that
    # changes one byte of it shows up here (re-render and commit when a change is meant).
    monkeypatch.chdir(REPO)
    rel = str(path.relative_to(REPO))
    ctx, _ = report_cli.report_files(rel, None, path.with_suffix(".md"), BACKFILL)    # linked as harness report --out does
    md = rp.render(ctx, "record", user_dir=REPO / "tests" / "fixtures" / "report" / "none")
    # `harness report --out` adds its marker as the last line; one rendered before markers has none.
    assert path.with_suffix(".md").read_text(encoding="utf-8") in (md, marked(md, "report"))


def test_the_report_uses_the_host_spec_stored_in_the_record_not_this_machines(tmp_path: Path, monkeypatch) -> None:
    # A record made on a host whose spec this checkout does not ship renders with the
    # host spec the record carries (its peak and name), and a record without one is matched here.
    from harness.ci import reportfiles

    monkeypatch.chdir(REPO)
    src = REPO / "tests" / "fixtures" / "report" / "record.json"
    data = json.loads(src.read_text())
    # A whole spec, as a record keeps one: a shipped spec's fields under another name and peak.
    shipped = json.loads((REPO / "harness" / "hosts_data" / "h100.json").read_text())
    data["host"]["profile"] = {**shipped, "name": "lab-box-9", "peak_bandwidth_gbs": 123.0,
                               "peak_bandwidth_source": "vendor sheet", "match": {}}
    p = tmp_path / "r.json"
    p.write_text(json.dumps(data))
    md = rp.render(reportfiles.context_for(str(p), backfill=BACKFILL), "record", user_dir=NO_USER_TEMPLATES)
    assert "host spec lab-box-9: 123 GB/s (vendor sheet)" in md
    data["host"]["profile"] = None      # matched nothing when it was made: unknown peak, no guess
    p.write_text(json.dumps(data))
    md = rp.render(reportfiles.context_for(str(p), backfill=BACKFILL), "record", user_dir=NO_USER_TEMPLATES)
    assert "no host spec matches this host: unknown peak" in md


def test_a_record_keeps_its_tensor_tables_and_renders_the_same_without_the_models(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    # Schema 4: the session reads each pairing's safetensors headers when it starts; the cost
    # model renders from those tables, so the record's Markdown does not depend on this machine.
    from harness.collect.models import model_files
    from harness.collect.record import Record
    from harness.core.migrations import migrate_v3

    monkeypatch.chdir(REPO)
    data = read_record(REPO / RECORD)
    with_models = {**migrate_v3(json.loads((REPO / RECORD).read_text())), "models": model_files(data["suite"])}
    roles = [m for roles in with_models["models"].values() for m in roles.values()]
    assert roles and all(m["tensors"] and "error" not in m for m in roles), with_models["models"]
    p = tmp_path / "r.json"
    p.write_text(json.dumps(with_models))
    before = rp.render(report_cli.context_for(str(p), backfill=BACKFILL), "record", user_dir=NO_USER_TEMPLATES)
    # The same record on a machine where the weights cannot be read: nothing read, nothing changes.
    import harness.collect.models as models_mod

    def unreadable(d):
        raise ValueError(f"{d}: unreadable here")
    monkeypatch.setattr(models_mod, "model_tensor_bytes", unreadable)
    assert rp.render(report_cli.context_for(str(p), backfill=BACKFILL), "record", user_dir=NO_USER_TEMPLATES) == before
    # Without stored tables (an older record) the directories are read at render time.
    del with_models["models"]
    p.write_text(json.dumps(with_models))
    assert "unreadable here" in rp.render(report_cli.context_for(str(p), backfill=BACKFILL), "record", user_dir=NO_USER_TEMPLATES)
    monkeypatch.undo()
    monkeypatch.chdir(REPO)
    # A new record stores them at creation.
    rec = Record.create(tmp_path / "new.json", data["suite"], {}, ["harness", "run"], planned_runs=1)
    assert json.loads(rec.path.read_text())["models"] == json.loads(json.dumps(model_files(data["suite"])))


def test_a_budgeted_record_says_how_many_runs_it_measured_its_duty_and_its_paired_verdicts(tmp_path: Path) -> None:
    # A time budget adds rounds past the suite's repetitions: the Setup must count what was
    # measured (the suite's number is only the minimum), say where the session's wall time went,
    # and give the paired verdicts that decided when to stop.
    rec = load(RECORD)
    rec["suite"]["settings"]["repetitions"] = 1
    rec["session_wall_s"] = 40.0
    rec["duty"] = {"session_wall_s": 40.0, "run_s": 30.0, "measured_run_s": 22.0, "duty_cycle": 0.55,
                   "waiting_s": 6.0, "runs": len(rec["runs"])}
    figure = {"ratio": 1.031, "lo": 0.99, "hi": 1.074, "n": 2, "verdict": "inconclusive", "detectable": 0.212}
    rec["sequential"] = {"budget_s": 30.0, "min_repetitions": 1, "max_repetitions": 4, "rounds": 2,
                         "stopped": "budget", "stopped_because": "the budget was spent",
                         "design": {"threshold": 0.1, "alpha": 0.05, "looks": 2, "figures": 1, "power": 0.8,
                                    "alpha_per_test": 0.025, "min_effect": 0.05},
                         "looks": [{"index": 1, "rounds": 1, "elapsed_s": 15.0, "figures": {}, "resolved": False},
                                   {"index": 2, "rounds": 2, "elapsed_s": 30.0, "figures": {"block3": figure},
                                    "resolved": False}]}
    md = render(write(tmp_path, "budgeted.json", rec))
    setup = {row[0]: row[1] for row in table_rows(details(md, "Full setup"))[0][1:]}
    assert "2 measured runs per arm and prompt (at least 1, then more in whole interleaved rounds within " \
           "a budget of 30 s of measuring" in setup["sampling"]
    assert setup["session"].startswith("duty cycle 55%: 22 s of measured runs in 40 s of session wall "
                                       "(warm-ups 8.0 s, waiting 6.0 s)")
    paired = details(md, "Against classic, paired")
    assert "Budget 30 s of measuring: 2 repetitions, 2 look(s); stopped: the budget was spent." in paired
    assert "- block3: +3.1% (-1.0% to +7.4%) over 2 pairs, inconclusive; smallest detectable 21.2%" in paired
    # A record made before budgets and session wall time has neither.
    plain = render(RECORD)
    assert "Against classic, paired" not in plain and "| session |" not in plain
    assert_well_formed(md)


def test_the_headline_counts_the_runs_behind_each_median_not_the_suites_repetitions(tmp_path: Path) -> None:
    # Two committed records once said "medians of 5" over 3 and 1 measured runs.
    data = json.loads((REPO / RECORD).read_text())
    reps = data["suite"]["settings"]["repetitions"]
    keep = {0}
    data["runs"] = [r for r in data["runs"] if r.get("warmup") or r.get("repetition") in keep]
    (tmp_path / "one.json").write_text(json.dumps(data))
    md = render(str(tmp_path / "one.json"))
    assert reps > 1 and "Medians of 1 run (the lab protocol" in md
    data["runs"] = []
    (tmp_path / "none.json").write_text(json.dumps(data))
    md = render(str(tmp_path / "none.json"))
    assert "Medians of" not in md and "block3 has no measured run that finished" in md.split("\n\n")[1]
