"""Contention said first, and never a clean verdict on contended data: a side
whose runs are contended past [watch] contended_share is said before any figure (run summary,
compare-commits, PR comment, JSON), and a paired verdict resting on contended runs past that
share reads "worse (+31.7%), but 39 of 48 runs were contended: not a clean verdict; rerun on a
quiet host" as an inconclusive check (exit 3). Synthetic records; nothing is timed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from harness_helpers import (
    cli_in_process,
    command_arm,
    one_commit_repo,
    sequential_section,
    tree_command,
    whole_record,
    write_suite,
)

from harness.analyze import comparisons, contended, paired
from harness.analyze.design import Design
from harness.analyze.summary import sequential_lines
from harness.ci import pullrequest, twocommits
from harness.ci.twocommits_summary import summary_json
from harness.collect import runner
from harness.collect.suite import load_suite
from harness.core.errors import UserError
from harness.core.hostinfo import ContentionResult

SETTINGS = {"watch": {"threshold_pct": 15.0, "contended_share": 0.25}}


def _runs(n, ms, busy, rng, arm="a", sd=0.01):
    """n measured runs of one arm, the first `busy` of them marked contended."""
    return [{"index": i, "arm": arm, "prompt": "p", "repetition": i, "status": "ok", "warmup": False,
             "ms_per_token": ms * float(np.exp(rng.normal(0.0, sd))),
             "marks": ["contended"] if i < busy else []} for i in range(n)]


def _sides(change, busy, n=24, seed=1):
    rng = np.random.default_rng(seed)
    return _runs(n, 10.0, busy, rng), _runs(n, 10.0 * (1 + change), busy, rng)


def test_a_clean_worse_on_runs_mostly_contended_is_inconclusive_and_says_its_reading():
    p = paired.Paired(8, 1.317, 1.053, 1.646, 0.1, "worse", "", threshold=0.1)
    q = contended.unclean(p, 39, 48, 0.25)
    assert q.verdict == "inconclusive"
    assert q.contended == {"reading": "worse", "contended": 39, "runs": 48, "limit": 0.25}
    assert q.note == ("worse (+31.7%), but 39 of 48 runs were contended: not a clean verdict; "
                      "rerun on a quiet host")


@pytest.mark.parametrize("verdict, busy, kept", [
    ("worse", 12, True),            # 25% exactly: within the share
    ("unchanged", 13, False),       # "not worse" is no clean verdict either
    ("improved", 40, False),
    ("inconclusive", 48, True),     # nothing clean to set aside
])
def test_only_clean_verdicts_past_the_share_are_set_aside(verdict, busy, kept):
    p = paired.Paired(24, 1.0, 0.99, 1.01, 0.02, verdict)
    assert (contended.unclean(p, busy, 48, 0.25) is p) == kept


def test_paired_check_on_contended_runs_exits_inconclusive_and_says_so_everywhere():
    base, head = _sides(0.30, busy=20)
    d = Design(threshold=0.1)
    figs = twocommits.judge(base, head, ["a"], d)
    c = twocommits.Comparison("b" * 40, "h" * 40, d, figs, [], {}, {"base": "b", "head": "h"}, {"rounds": 24}, 60.0)
    c.notes.contention = contended.sides_info({"head": head, "base": base}, SETTINGS)
    assert c.exit_status == twocommits.INCONCLUSIVE == 3
    head_line = c.headline()
    assert head_line.startswith("inconclusive: a ms/token worse (+2") or head_line.startswith("inconclusive: a ms/token worse (+3")
    assert head_line.endswith("but 40 of 48 runs were contended: not a clean verdict; rerun on a quiet host")
    row = summary_json(c)["figures"][0]
    assert row["verdict"] == "inconclusive" and row["contended"]["reading"] == "worse"
    assert summary_json(c)["contention"]["over"] == ["head", "base"]
    md = pullrequest.render_markdown(c, {"machine": "m", "host": {}, "command": "harness pr-check",
                                     "duration_s": 60.0}).splitlines()
    assert md[3].startswith("**1 inconclusive: a ms/token, read slower (+2") and md[3].endswith(
        "but 40 of 48 runs contended.**")
    assert md[5].startswith("contended: 20 of 24 runs of head (83%), 20 of 24 runs of base (83%);")
    assert "[watch] contended_share" in md[5] and "[watch] threshold_pct = 15" in md[5]


def test_the_same_runs_quiet_fail_and_the_suites_share_decides():
    base, head = _sides(0.30, busy=0)
    d = Design(threshold=0.1)
    quiet = twocommits.Comparison("b" * 40, "h" * 40, d, twocommits.judge(base, head, ["a"], d), [], {},
                               {}, {}, 1.0)
    assert quiet.exit_status == twocommits.FAIL and quiet.headline().startswith("FAIL: a ms/token +")
    base, head = _sides(0.30, busy=20)
    lenient = twocommits.judge(base, head, ["a"], d, share=0.9)
    assert lenient[0].result.verdict == "worse" and lenient[0].result.contended is None


def test_contention_lines_name_the_share_and_the_setting_and_fit_80_columns():
    base, head = _sides(0.0, busy=3)
    assert contended.contention_lines(contended.sides_info({"head": head, "base": base}, SETTINGS)) == []
    info = contended.sides_info({"head": _sides(0.0, busy=7, n=8)[1], "base": _sides(0.0, busy=1, n=8)[0]},
                                SETTINGS)
    lines = contended.contention_lines(info)
    assert lines[0] == "contended: 7 of 8 runs of head (88%), 1 of 8 runs of base (12%);"
    assert lines[1] == "  over the 25% a side may have ([watch] contended_share);"
    assert "[watch] threshold_pct = 15 marks a run contended" in lines[2]
    assert all(len(x) <= 80 for x in lines)


def test_vs_classic_verdict_of_a_session_is_not_clean_on_contended_pairs():
    rng = np.random.default_rng(3)
    runs = _runs(12, 10.0, 10, rng, arm="classic") + _runs(12, 7.0, 10, rng, arm="spec")
    rec = {"suite": {"name": "t", "settings": SETTINGS, "pairings": [{"name": "x", "target": "t"}],
                     "prompts": [{"name": "p", "text": "p"}],
                     "arms": [{"name": "classic", "pairing": "x", "engine": "e", "block": 1, "env": {}, "timeout_s": 60.0},
                              {"name": "spec", "pairing": "x", "engine": "e", "block": 4, "env": {}, "timeout_s": 60.0}]},
           "runs": runs}
    p = comparisons.judge_vs_classic(rec, Design(threshold=0.1))["spec"]
    assert p.verdict == "inconclusive" and p.contended["reading"] == "improved"
    seq = whole_record(sequential=sequential_section([{"spec": p.to_dict()}], rounds=12, stopped_because="budget"))
    line = sequential_lines(seq)[-1]
    assert "spec: -29.9%" in line and "over 12 pairs, inconclusive: improved (-29.9%)" in line
    assert "but 20 of 24 runs were contended: not a clean verdict" in line


def _all_contended(monkeypatch):
    real = runner._measure

    def measure(engines, req, s, pacer):
        out, failure, wall_s, _ = real(engines, req, s, pacer)
        return out, failure, wall_s, ContentionResult(enabled=True, samples=20, contended_samples=20,
                                                      contended_fraction=1.0)
    monkeypatch.setattr(runner, "_measure", measure)


def test_run_summary_says_contention_first(tmp_path, monkeypatch, capsys):
    _all_contended(monkeypatch)
    suite = write_suite(tmp_path, [command_arm("a")], repetitions=2)
    r = cli_in_process(["run", str(suite), "--record", str(tmp_path / "r.json"), "--json", str(tmp_path / "s.json")],
                       tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0] == "contended: 2 of 2 runs of a (100%);"
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["contention"]["over"] == ["a"]


def test_compare_commits_on_contended_runs_says_so_first_and_exits_3(tmp_path, monkeypatch, capsys):
    _all_contended(monkeypatch)
    repo = one_commit_repo(tmp_path)
    arm = command_arm("a", command=tree_command())
    suite = write_suite(tmp_path, [arm], repetitions=3)
    r = cli_in_process(["compare-commits", "HEAD", "HEAD", "--suite", str(suite), "--repo", str(repo),
                        "--work", str(tmp_path / "w")], tmp_path, monkeypatch, capsys)
    assert r.returncode == 3, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0] == "contended: 3 of 3 runs of head (100%), 3 of 3 runs of base (100%);"
    summary = json.loads(lines[-1])
    assert summary["exit_status"] == 3 and "runs were contended: not a clean verdict" in summary["headline"]


def test_suite_sets_the_share_and_refuses_one_out_of_range(tmp_path):
    s = load_suite(write_suite(tmp_path, [command_arm("a")], watch={"contended_share": 0.5}))
    assert s.settings.watch.contended_share == 0.5 and contended.share_limit(s.settings) == 0.5
    with pytest.raises(UserError, match="watch.contended_share"):
        load_suite(write_suite(tmp_path, [command_arm("a")], watch={"contended_share": 1.5}))
