"""The PR comment (harness.render.prcomment) on a real comparison: two committed records of one
suite on one H200 (cuDNN off as base, on as head), judged paired by the real code, a change
planted on one arm where a verdict kind needs one. What shows is one sentence with each gated
change's size and interval, the gated figures in five columns and the links; the diagnostics,
asv's table (rounded, with the reason wherever asv disagrees) and the method are folded.
Also: asv's rows once each from the environment pr-check measured, and the links' settings."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness.analyze.design import Design
from harness.ci import asvtool, pullrequest, twocommits
from harness.core.errors import UserError
from harness.core.schema import load_record
from harness.render import prcomment
from harness.render.prinput import CheckMeta, Links, MachineHost

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "reports" / "20261205-022112-random-8b-spec-h200.json"            # cuDNN off
HEAD = REPO / "reports" / "20261205-021945-random-8b-spec-cudnn-on-h200.json"   # cuDNN on
META = CheckMeta("h200", "harness pr-check main HEAD", 300.0, MachineHost(chip="NVIDIA H200"))


def _runs(path: Path) -> dict:
    data = json.loads(path.read_text())
    load_record(data, path)
    return data


_SIDES = (_runs(BASE), _runs(HEAD))


def _check(plant: dict[str, float] | None = None) -> twocommits.Comparison:
    """The two records judged as pr-check judges its sides, each arm's head ms/token times
    `plant[arm]` (a change of known size on real run-to-run noise)."""
    base, head = _SIDES
    arms = [a["name"] for a in base["suite"]["arms"]]
    runs = [{**r, "ms_per_token": r["ms_per_token"] * (plant or {}).get(r["arm"], 1.0)}
            if isinstance(r.get("ms_per_token"), float) else r for r in head["runs"]]
    design = Design(threshold=0.10, figures=len(arms))
    return twocommits.Comparison("b" * 40, "h" * 40, design, twocommits.judge(base["runs"], runs, arms, design),
                              [], {}, {"base": str(BASE), "head": str(HEAD)},
                              {"rounds": 3, "stopped_because": "every planned run was made"}, 300.0)


def _asv_table(c: twocommits.Comparison) -> str:
    """asv compare's table over the same figures, its cells as asv prints them (raw floats), its
    classic ms/token called worse where the pairs could not see it, block3's ms/round left
    unflagged."""
    lines = ["| Change | Before [bbbbbbbb] | After [hhhhhhhh] | Ratio | Benchmark (Parameter) |",
             "|--------|-------------------|------------------|-------|-----------------------|"]
    bench = {"ms/token": "Decode.track_ms_per_token", "ms/round": "Rounds.track_ms_per_round"}
    for f in c.figures:
        if f.figure not in bench or f.base_median is None:
            continue
        mark = "+" if (f.arm, f.figure) == ("classic", "ms/token") else ""
        lines.append(f"| {mark} | {f.base_median!r}±2 | {f.head_median!r}±2 | "
                     f"{f.head_median / f.base_median:.2f} | bench_specdec.{bench[f.figure]}('{f.arm}') |")
    lines.append("|  | n/a | n/a | n/a | bench_specdec.Decode.track_identity_mismatches('classic') |")
    return "\n".join(lines) + "\n"


def _comment(c: twocommits.Comparison, links: Links | None = None) -> str:
    table = _asv_table(c)
    return prcomment.comment(c, META, asvtool.parse_compare(table), table, links)


# --- the headline: one sentence per verdict kind --------------------------------------------

def test_a_resolved_slowdown_is_said_with_its_size_and_interval():
    c = _check({"classic": 1.35})
    classic = next(f for f in c.gated if f.arm == "classic")
    assert classic.result.verdict == "worse" and c.exit_status == twocommits.FAIL
    lo, hi = classic.result.lo - 1, classic.result.hi - 1
    head = prcomment.headline(c)
    assert head.startswith(f"HEAD is {classic.result.ratio - 1:.1%} slower on classic ms/token "
                           f"({lo:+.1%} to {hi:+.1%}); ")
    assert " unchanged; " in head and " exact figures identical; " in head and "pass" not in head


def test_the_json_summary_carries_the_comments_sentence():
    from harness.ci.twocommits_summary import summary_json
    c = _check({"classic": 1.35})
    assert summary_json(c)["finding"] == prcomment.headline(c)
    assert summary_json(c)["headline"].startswith("FAIL: classic ms/token +")   # machines' word kept


def test_a_resolved_speedup_is_said_as_faster():
    c = _check({"classic": 0.7})
    head = prcomment.headline(c)
    assert c.exit_status != twocommits.FAIL
    assert head.startswith("HEAD is ") and "% faster on classic ms/token (-" in head


def test_unchanged_figures_are_counted_with_the_threshold_they_were_judged_against():
    c = _check({"classic": 1.05, "mtp-block3": 1.03, "mtp-block3-profiled": 1.01})
    c.figures = [f for f in c.figures if f.result.verdict == "unchanged" or not f.gated]
    assert c.exit_status == twocommits.PASS
    exact = [f for f in c.gated if f.figure.endswith(" (exact)")]
    n = len(c.gated) - len(exact)
    assert exact and n > 1
    # Exact figures held exactly: counted apart, with no threshold.
    assert prcomment.headline(c) == f"{n} figures unchanged within ±10%; {len(exact)} exact figures identical."


def test_what_the_host_could_not_see_is_never_called_unchanged():
    c = _check()
    unsure = [f for f in c.gated if f.result.verdict == "inconclusive"]
    assert unsure and c.exit_status == twocommits.INCONCLUSIVE
    head = prcomment.headline(c)
    assert f"; {len(unsure)} inconclusive: " in head
    mtp = next(f for f in unsure if f.arm == "mtp-block3")
    assert f"mtp-block3 ms/token, could not see under {mtp.result.detectable:.0%}" in head
    unchanged = sum(f.result.verdict == "unchanged" and not f.figure.endswith(" (exact)") for f in c.gated)
    assert head.startswith(f"{unchanged} figure{'s' if unchanged != 1 else ''} unchanged within ±10%; ")
    assert "pass" not in head and "no change" not in head


def test_arms_that_could_not_see_for_one_reason_are_named_together():
    c = _check()
    for f in c.gated:        # as a check of a few pairs reads: nothing under doubling visible
        if f.figure == "ms/token":
            f.result = replace(f.result, verdict="inconclusive", detectable=5.0, contended=None)
    head = prcomment.headline(c)
    assert head.endswith("; 4 inconclusive: classic, draft-block3, mtp-block3 and mtp-block3-profiled "
                         "ms/token, too few pairs (3) to see any change."), head


def test_a_figure_past_doubling_says_too_few_pairs_not_a_size():
    # mtp-block3's draft_block phase: 3 pairs, smallest detectable change near 600%.
    md = _comment(_check())
    row = next(x for x in md.splitlines() if x.startswith("| mtp-block3 phase ms/round: draft_block |"))
    assert "| inconclusive: too few pairs (3) to see any change | - |" in row
    assert "could not see under" not in row and "%, above the 10% threshold" not in row


def test_broken_outputs_and_runs_failing_at_head_only_are_said_after_the_figures():
    from harness.analyze.identity import IdentityRow
    c = _check({"classic": 0.7})
    c.identity = [IdentityRow("classic", "p", "differs", "1 of 3 head runs: differs at token 3")]
    c.failures = {"head": {"mtp-block3": 1}}
    assert c.exit_status == twocommits.FAIL
    head = prcomment.headline(c)
    assert head.startswith("HEAD is ") and "% faster on classic ms/token" in head
    assert head.endswith("; runs fail at HEAD only: mtp-block3; 1 arm/prompt output no longer "
                         "byte-identical to BASE's.")
    shown = prcomment.visible_lines(_comment(c))
    assert "Not byte-identical to BASE's output: classic p (1 of 3 head runs: differs at token 3)" in shown


# --- what shows, and what folds -------------------------------------------------------------

def test_what_shows_is_short_and_its_table_has_five_columns():
    c = _check({"classic": 1.35})
    md = _comment(c, Links("https://ci.example/r/hhhh", "https://bench.example/"))
    shown = prcomment.visible_lines(md)
    assert len(shown) <= 25, "\n".join(shown)
    assert shown[3] == f"**{prcomment.headline(c)}**"
    rows = [x for x in shown if x.startswith("|")]
    assert rows[0] == "| figure | base | head | change (interval) | verdict |"
    assert all(x.count("|") == 6 for x in rows)
    # The six exact figures that held are one row; the four timed ones a row each.
    assert len(rows) == 2 + 4 + 1 and rows[-1].startswith("| rejection rate and tokens/round of draft-block3, ")
    assert rows[-1].endswith("(6 exact figures) | - | - | none (exact at temperature 0) | unchanged |")
    assert "| **slower** |" in "\n".join(rows) and "ms/round" not in "\n".join(shown)
    # Each median as people read it; the method is folded.
    assert not any("Huber" in x or "O'Brien" in x for x in shown) and "Huber" in md


def test_the_default_suite_shows_at_most_25_lines():
    # The committed default-suite record (5 arms, 3 prompts, 7 repetitions), its repetitions
    # 0-2 as base and 4-6 as head: an A/A check on real runs, classic slowed by half.
    path = REPO / "reports" / "20261207-035522-default-linux-cpu.json"
    data = _runs(path)
    runs = [r for r in data["runs"] if not r.get("warmup")]
    base = [r for r in runs if r["repetition"] < 3]
    head = [{**r, "repetition": r["repetition"] - 4,
             "ms_per_token": r["ms_per_token"] * (1.5 if r["arm"] == "classic" else 1.0)}
            for r in runs if r["repetition"] >= 4]
    arms = [a["name"] for a in data["suite"]["arms"]]
    design = Design(threshold=0.10, figures=len(arms))
    c = twocommits.Comparison("b" * 40, "h" * 40, design, twocommits.judge(base, head, arms, design), [], {},
                           {"base": str(path), "head": str(path)}, {"rounds": 9}, 60.0)
    shown = prcomment.visible_lines(_comment(c, Links("https://ci.example/r", "https://bench.example/")))
    assert len(arms) == 5 and len(shown) <= 25, "\n".join(shown)
    assert all(x.count("|") == 6 for x in shown if x.startswith("|"))      # five columns
    assert sum(x.startswith(tuple(f"| {a} ms/token |" for a in arms)) for x in shown) == 5
    assert "% slower on classic ms/token (+" in shown[3]


def test_links_show_when_configured_and_not_otherwise():
    c = _check()
    md = _comment(c, Links("https://ci.example/r/hhhh", "https://bench.example/"))
    assert "[Report](https://ci.example/r/hhhh) · [Dashboard](https://bench.example/)" in prcomment.visible_lines(md)
    assert "[Dashboard](https://bench.example/)" in _comment(c, Links(None, "https://bench.example/"))
    assert "[Report]" not in _comment(c, Links(None, "https://bench.example/"))
    for md in (_comment(c), _comment(c, Links())):
        assert "[Report]" not in md and "[Dashboard]" not in md


def test_asv_table_is_rounded_and_says_why_it_disagrees():
    c = _check()
    md = _comment(c)
    asv = md.split("<summary>asv over the same samples")[1].split("</details>")[0]
    classic = next(f for f in c.gated if f.arm == "classic")
    assert classic.result.verdict == "inconclusive"
    row = next(x for x in asv.splitlines() if "track_ms_per_token('classic')" in x)
    # The raw float asv prints, as people read it, its error a share of the value.
    assert repr(classic.base_median) not in md
    assert f"| {prcomment.value(classic.base_median, 'ms/token')} ±" in row
    assert row.startswith("| worse |") and "the paired interval could not settle it" in row
    # Rows where asv and the pairs agree give no reason; benchmarks with no value are counted.
    agree = [x for x in asv.splitlines() if x.startswith("| no change |") and "ms_per_round('draft-block3')" in x]
    assert agree and agree[0].endswith("| - |")
    assert "track_identity_mismatches" not in asv and "1 benchmark with no value" in asv
    assert ": 1 regression, " in asv and "; 1 differs from the paired verdict" in asv


def test_asv_gives_the_reason_where_the_pairs_resolved_a_change_it_did_not_flag():
    from harness.render.prcomment_asv import reason
    rows = asvtool.parse_compare("| | 6.1±1 | 6.5±1 | ~1.07 | b.Decode.track_ms_per_token('classic') |\n"
                                 "| | 6.1±0.1 | 6.3±0.1 | 1.03 | b.Decode.track_ms_per_token('block3') |\n")
    assert "found it not significant; pairing runs back to back" in reason(rows[0], "worse", 1.1)
    assert "asv calls a change only past 10% on medians of unpaired runs" in reason(rows[1], "worse", 1.1)
    assert reason(rows[1], "unchanged", 1.1) == "" and reason(rows[1], None, 1.1) == ""


# --- links: set once in asv.conf.json, or per check -------------------------------------------

def test_links_come_from_the_option_else_the_config_and_fill_in_the_check():
    conf = asvtool.AsvConfig(REPO / "asv.conf.json", {pullrequest.REPORT_URL_KEY: "https://ci.example/{machine}/{head}",
                                                      pullrequest.DASHBOARD_URL_KEY: "https://bench.example/"})
    links = pullrequest.check_links(conf, None, None)
    assert pullrequest.filled(links, "b" * 40, "h" * 40, "h200") == Links(f"https://ci.example/h200/{'h' * 40}",
                                                                     "https://bench.example/")
    assert pullrequest.check_links(conf, "https://x/{base}", "") == Links("https://x/{base}", None)
    with pytest.raises(UserError, match="names 'sha'; a link may name only {base}, {head}, {machine}"):
        pullrequest.check_links(conf, "https://x/{sha}", None)
    bad = asvtool.AsvConfig(REPO / "asv.conf.json", {pullrequest.DASHBOARD_URL_KEY: 3})
    with pytest.raises(UserError, match="key 'harness_dashboard_url' must be a URL string"):
        pullrequest.check_links(bad, None, None)


# --- asv's rows: each benchmark once ----------------------------------------------------------

M = "m1-ultra"
EXISTING = f"{M}/existing-py_work_venv_bin_python"
VIRTUALENV = f"{M}/virtualenv-py3.11"
BENCHES = [("+", "2.85±0.1", "7.66±0.3", "2.69", "bench_engine.Decode.track_ms_per_token('classic')")] + [
    ("", "1.00", "1.01", "1.01", f"bench_engine.Rounds.track_phase_ms_per_round('classic', 'p{i}')") for i in range(20)]


def _two_env_table() -> str:
    """asv compare's table when both commits have results in two environments."""
    lines = ["| Change   | Before [b0e27ff4] | After [dc71bf9c] | Ratio | Benchmark (Parameter) |",
             "|----------|-------------------|------------------|-------|-----------------------|"]
    for env in (EXISTING, VIRTUALENV):
        for mark, b, a, ratio, name in BENCHES:
            # The virtualenv's older results read differently: they must not be what is shown.
            mark2 = mark if env == EXISTING else ""
            lines.append(f"| {mark2} | {b} | {a} | {ratio} | {name} [{env}] |")
    return "\n".join(lines) + "\n"


def test_each_benchmark_is_kept_once_from_the_environment_pr_check_measured():
    rows = pullrequest.measured_rows(asvtool.parse_compare(_two_env_table()))
    assert len(rows) == len(BENCHES) and {r.env for r in rows} == {EXISTING}
    assert rows[0].mark == "+"


def test_asv_compare_is_asked_for_the_measured_environment_only(monkeypatch, tmp_path):
    seen = []

    def fake_run(args, conf, machine_file=None, env=None, echo=True, timeout_s=None):
        seen.append(list(args))
        return asvtool.AsvRun(list(args), 0, _two_env_table())
    monkeypatch.setattr(pullrequest, "run_asv", fake_run)
    rows, _ = pullrequest.asv_rows(None, tmp_path / "m.json", M, "b0e27ff4", "dc71bf9c", 1.1)
    assert "--python=same" in seen[0] and len(rows) == len(BENCHES)
