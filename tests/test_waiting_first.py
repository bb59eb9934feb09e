"""Waiting said first: the starter suite shows [quiet] and [watch]
with what each setting governs, and a session that spent most of its time waiting, or whose
quiet wait timed out, says so in the summary's first line with the setting that governs it."""

from __future__ import annotations

import time

from harness_helpers import cli_in_process, command_arm, one_commit_repo, tree_command, write_suite
from msgspec.structs import fields

from harness.analyze.summary import waiting_lines
from harness.ci.init import render
from harness.collect.host import quiet as host_quiet
from harness.collect.suite.model import QuietSettings, WatchSettings
from harness.core.tomlfile import tomllib


def test_starter_suite_shows_quiet_and_watch_tables_naming_each_setting(tmp_path):
    text = render(tmp_path, "harness", ["x"], ["m3-ultra"])["benchmarks/suite.toml"]
    data = tomllib.loads(text)
    assert data["quiet"]["enabled"] is True and data["watch"]["enabled"] is True
    quiet = text[text.index("[quiet]"):text.index("[watch]")]
    watch = text[text.index("[watch]"):text.index("[[pairings]]")]
    for f in fields(QuietSettings):
        assert f"{f.name} =" in quiet, f.name      # set, or shown commented with what it governs
    for f in fields(WatchSettings):
        assert f"{f.name} =" in watch, f.name
    before = text[:text.index("[quiet]")]
    assert "busy host" in before[before.rindex("# The quiet wait"):]   # what to change there


def _timed_out_wait(self, cooldown_s=0.0, on_tick=None):
    time.sleep(0.3)
    return {"waited_s": 0.3, "cooldown_s": cooldown_s, "total_s": 0.3, "timed_out": True,
            "samples": 2, "busy_samples": 2, "timeout_s": self.timeout_s, "settle_s": self.settle_s}


def test_run_whose_quiet_wait_timed_out_says_so_first_with_timeout_s(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(host_quiet.QuietWait, "wait", _timed_out_wait)
    suite = write_suite(tmp_path, [command_arm("classic")], repetitions=3,
                        quiet={"enabled": True, "timeout_s": 120})
    r = cli_in_process(["run", str(suite), "--record", str(tmp_path / "r.json")], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("waited ") and "for a quiet machine (3 quiet-wait timeouts);" in lines[0]
    assert lines[1].strip().startswith("[quiet] timeout_s = 120 governs it")
    assert all(len(x) <= 80 for x in lines[:2])


def _record(runs, wall, **settings):
    return {"schema_version": 5, "kind": "harness.record", "session_id": "t", "created": "2026-12-07T00:00:00",
            "session_wall_s": wall, "runs": [{"index": i, "status": "ok", **r} for i, r in enumerate(runs)],
            "suite": {"name": "s", "pairings": [], "arms": [], "prompts": [], "settings": {"cooldown_s": 0.05, "cooldown_ratio": 0.25, "cooldown_cap_s": 2.0,
                                   "quiet": {"enabled": True, "threshold_pct": 15.0, "settle_s": 3.0,
                                             "timeout_s": 120.0}, **settings}}}


def test_waiting_lines_name_the_cooldown_settings_when_cooldowns_took_the_session():
    runs = [{"wall_s": 0.1, "cooldown_s": 2.0, "quiet_wait_s": 0.0} for _ in range(10)]
    lines = waiting_lines(_record(runs, 22.0))
    assert lines[0] == "waited 20 s of 22 s cooling down between runs;"
    assert "cooldown_s = 0.05, cooldown_ratio = 0.25 and cooldown_cap_s = 2 govern it" in lines[1]


def test_waiting_lines_say_nothing_when_measuring_took_the_session():
    runs = [{"wall_s": 2.0, "cooldown_s": 0.5, "quiet_wait_s": 0.5} for _ in range(10)]
    assert waiting_lines(_record(runs, 31.0)) == []


def test_compare_commits_whose_quiet_wait_timed_out_says_so_before_any_figure(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(host_quiet.QuietWait, "wait", _timed_out_wait)
    repo = one_commit_repo(tmp_path)
    arm = command_arm("a", command=tree_command())   # reads each commit's tree
    suite = write_suite(tmp_path, [arm], repetitions=2, quiet={"enabled": True, "timeout_s": 45})
    r = cli_in_process(["compare-commits", "HEAD", "HEAD", "--suite", str(suite), "--repo", str(repo),
                        "--work", str(tmp_path / "w")], tmp_path, monkeypatch, capsys)
    assert r.returncode in (0, 3), r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("waited ") and "for a quiet machine (4 quiet-wait timeouts);" in lines[0]
    assert lines[1].strip().startswith("[quiet] timeout_s = 45 governs it")
    assert lines[2].startswith("Environment: ")


def test_pr_comment_says_the_waiting_right_under_the_headline():
    from harness.analyze.paired import Design
    from harness.analyze.summary import check_waiting_lines
    from harness.ci import pullrequest
    from harness.ci.twocommits import Comparison
    from harness.core.runs import as_record
    runs = [{"index": 0, "status": "ok", "wall_s": 0.1, "quiet_wait_s": 30.0, "cooldown_s": 0.0,
             "marks": ["quiet_wait_timeout"]}]
    rec = {"schema_version": 5, "kind": "harness.record", "session_id": "t", "created": "2026-12-07T00:00:00",
           "duty": {"session_wall_s": 70.0, "run_s": 0.1, "measured_run_s": 0.1, "duty_cycle": 0.1 / 70.0,
                    "waiting_s": 30.0, "runs": 1}, "runs": runs,
           "suite": {"name": "s", "pairings": [], "arms": [], "prompts": [], "settings": {"quiet": {"timeout_s": 30.0}}}}
    typed = as_record(rec)
    waiting = check_waiting_lines({"base": typed, "head": typed}, 62.0)
    assert waiting[0] == "waited 60 s of 62 s for a quiet machine (2 quiet-wait timeouts);"
    c = Comparison("b" * 40, "h" * 40, Design(), [], [], {}, {"base": "b", "head": "h"}, {"rounds": 2}, 62.0)
    md = pullrequest.render_markdown(c, {"machine": "m", "host": {}, "command": "harness pr-check", "duration_s": 62.0,
                                     "waiting": waiting}).splitlines()
    assert md[3].startswith("**") and md[5].startswith("waited 60 s of 62 s for a quiet machine")
    assert "[quiet] timeout_s = 30 governs it" in md[5]
