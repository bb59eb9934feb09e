"""History, end to end, on a scratch repository of 32 real git commits of a command engine
(tests/fixtures/sleepy: a token every DELAY_MS, a constant in its code):

    commits 3-12   each makes the engine 0.4% slower (a slow drift, 4% in all)
    commit 17      makes it 30% slower (the step)
    the others     touch a notes file

The nightly measured every fourth commit (a night measures a few), so its series hold 9 points:
each is a real `harness run` of that commit's tree, its samples stored as asv results with asv's
own Results class (what the nightly's `asv run` stores, without building an environment per
commit). On them: the change points name the range that holds commit 17 and nothing else, one
alert is filed and not filed again over a week of further nights (each measured the same way),
the bisection (paired trials of the real commits) finds commit 17, and an acknowledgement of it
silences the alert and shows its reason in the PR comment and in the report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
import pytest
from asv_scratch import commit_all, git
from harness_helpers import REPO, clean_env, harness_argv, last_json

from harness.ci.ackfile import acks_for_check, acks_path, load_acks
from harness.ci.asvtool import load_config
from harness.ci.history import alert_title, detect, file_alerts, suite_table

pytestmark = pytest.mark.e2e

MACHINE = "lab"
FIXTURE = REPO / "tests" / "fixtures" / "sleepy"
SUITE = """
name = "sleepy"
max_tokens = 24
temp = 0.0
repetitions = 6
warmups = 1
cooldown_s = 0
budget_s = 15
max_repetitions = 60
threshold = 0.10
looks = 3

[quiet]
enabled = false

[watch]
contended_share = 1.0     # these verdicts, not the contended rule (tests/test_contended.py)

[engines.sleepy]
override_prefixes = ["SLEEPY_"]

[[pairings]]
name = "none"
target = ".."

[[arms]]
name = "classic"
engine = "sleepy"
block = 1
command = ["{python}", "-m", "sleepy", "--max-tokens", "{max_tokens}", "--prompt-file", "{prompt_file}"]

[[prompts]]
name = "p"
text = "hello"
"""
CONF = {"version": 1, "project": "sleepy", "repo": ".", "branches": ["main"], "dvcs": "git",
        "environment_type": "virtualenv", "results_dir": "results", "html_dir": "html",
        "benchmark_dir": "benchmarks", "harness_suite": "benchmarks/suite.toml"}
MS = "bench_engine.Decode.track_ms_per_token"
REASON = "verify now re-checks every draft (PR 42): +30% on classic expected"


def _set_delay(repo: Path, factor: float) -> None:
    p = repo / "sleepy.py"
    text = p.read_text()
    old = next(line for line in text.splitlines() if line.startswith("DELAY_MS = "))
    p.write_text(text.replace(old, f"DELAY_MS = {float(old.split('= ')[1]) * factor!r}"))


def _measure(lab_root: Path, repo: Path, sha: str, when: int) -> None:
    """What the nightly's asv run does for one commit, without asv's environment build: the
    commit's tree exported from git, one `harness run` of its suite with its own engine on the
    path, and the session's samples stored as asv results (asv's own Results class)."""
    from asv.results import Results
    from asv.runner import BenchmarkResult

    from harness.ci.asvsession import arm_specs, figures_from_record, load_suite_file

    tree = lab_root / "trees" / sha[:12]
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", sha], cwd=repo, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    suite = tree / "benchmarks" / "nightly.toml"          # the suite without the checks' budget
    suite.write_text("\n".join(x for x in SUITE.splitlines() if not x.startswith(("budget_s", "max_rep"))))
    record = lab_root / "records" / f"{sha[:12]}.json"
    r = subprocess.run(harness_argv("run", str(suite), "--record", str(record)), cwd=tree, capture_output=True,
                       text=True, timeout=300, env=clean_env(PYTHONPATH=f"{tree}{os.pathsep}{REPO}"))
    assert r.returncode == 0, r.stderr[-2000:]
    data = json.loads(record.read_text())
    figs = figures_from_record(data["runs"], arm_specs(load_suite_file(suite), environ={}))
    samples = figs.ms_per_token.samples["classic"]
    res = Results({"machine": MACHINE, "python": "3.11"}, {}, sha, when, "3.11", "virtualenv-py3.11", {})
    bench = {"name": MS, "version": "1", "params": [["'classic'"]], "param_names": ["arm"]}
    res.add_result(bench, BenchmarkResult(result=[float(np.median(samples))], samples=[samples], number=[1],
                                          errcode=0, stderr="", profile=None), record_samples=True)
    res.save(str(repo / "results"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("history")
    repo = root / "sleepy"
    repo.mkdir()
    shutil.copy(FIXTURE / "sleepy.py", repo / "sleepy.py")
    (repo / "benchmarks").mkdir()
    (repo / "benchmarks" / "suite.toml").write_text(SUITE)
    (repo / "asv.conf.json").write_text(json.dumps(CONF, indent=1))
    (repo / ".gitignore").write_text("results/\n.harness/\n__pycache__/\n")
    (repo / "NOTES").write_text("notes\n")
    git(repo, "init", "-q", "-b", "main")
    shas, levels = [commit_all(repo, "sleepy 1.0")], [1.0]
    for i in range(1, 32):
        factor = 1.004 if 3 <= i <= 12 else 1.30 if i == 17 else 1.0
        if factor != 1.0:
            _set_delay(repo, factor)
        else:
            (repo / "NOTES").write_text(f"notes {i}\n")
        shas.append(commit_all(repo, f"change {i}"))
        levels.append(levels[-1] * factor)
    (repo / "results" / MACHINE).mkdir(parents=True)
    (repo / "results" / MACHINE / "machine.json").write_text(json.dumps(
        {"machine": MACHINE, "arch": "x86_64", "cpu": "cpu", "num_cpu": "2", "os": "Linux", "ram": "1", "version": 1}))
    for i in list(range(0, 32, 4)) + [31]:            # the nightly measured every fourth commit
        _measure(root, repo, shas[i], 1_700_000_000_000 + i * 86_400_000)
    return {"root": root, "repo": repo, "shas": shas, "levels": levels}


def _history(lab: dict) -> tuple:
    conf = load_config(lab["repo"] / "asv.conf.json")
    commits = git(lab["repo"], "rev-list", "--first-parent", "--reverse", "main").split()
    h = detect(conf, MACHINE, commits, suite_table(lab["repo"] / "benchmarks" / "suite.toml"),
               load_acks(conf.root, acks_path(conf)))
    return h, commits


def test_the_step_is_found_in_the_range_that_holds_it_and_the_drift_is_not(lab):
    r = subprocess.run(harness_argv("changes", "--machine", MACHINE, "--json", str(lab["root"] / "changes.json")),
                       cwd=lab["repo"], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert last_json(r.stdout) == {"kind": "harness.changes", "machine": MACHINE, "series": 1, "commits": 32,
                                   "steps": 1, "unstable": 0}
    (step,) = json.loads((lab["root"] / "changes.json").read_text())["steps"]
    shas = lab["shas"]
    assert (step["last_before"], step["first_after"]) == (shas[16], shas[20])
    assert step["commits"] == shas[17:21] and shas[17] in step["commits"]
    assert step["direction"] == "regression" and step["ratio"] == pytest.approx(1.30, abs=0.06)
    assert step["figure"] == "ms_per_token" and step["arm"] == "classic"


def test_one_alert_filed_once_then_a_quiet_week(lab, tmp_path):
    h, commits = _history(lab)
    alerts = tmp_path / "alerts"
    notified = tmp_path / "notified.txt"
    notify = [sys.executable, "-c", "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + '|' + sys.argv[3] + '\\n')",
              str(notified), "{alert}", "{title}"]
    (new,) = file_alerts(h, commits, alerts, notify)
    assert new["title"].startswith("regression: classic ms_per_token +") and lab["shas"][20][:8] in new["title"]
    assert new["series"] == [f"{MS}('classic')"] and new["first_after"] == lab["shas"][20]
    body = Path(new["file"]).read_text()
    assert lab["shas"][17][:8] in body and "harness bisect" in body
    assert notified.read_text().count("\n") == 1 and new["file"] in notified.read_text()
    feed = ET.parse(alerts / "feed.atom").getroot()
    entries = feed.findall("{http://www.w3.org/2005/Atom}entry")
    assert len(entries) == 1 and "regression" in entries[0].find("{http://www.w3.org/2005/Atom}title").text
    # The same step the next night: no second alert.
    h2, _ = _history(lab)
    assert file_alerts(h2, commits, alerts, notify) == [] and notified.read_text().count("\n") == 1
    # A week of nights on unchanged code: each adds one measured commit; no new alert.
    repo = lab["repo"]
    for night in range(7):
        (repo / "NOTES").write_text(f"night {night}\n")
        sha = commit_all(repo, f"night {night}")
        _measure(lab["root"], repo, sha, 1_800_000_000_000 + night * 86_400_000)
        hn, cn = _history(lab)
        assert file_alerts(hn, cn, alerts, notify) == [], [alert_title(f) for f in hn.found if f.new]
    assert len(json.loads((alerts / "state.json").read_text())["alerts"]) == 1


def test_bisect_finds_the_commit_from_the_ranges_ends(lab):
    shas = lab["shas"]
    r = subprocess.run(harness_argv("bisect", shas[16], shas[20], "--arm", "classic", "--repo", str(lab["repo"]),
                                    "--suite", str(lab["repo"] / "benchmarks" / "suite.toml"),
                                    "--work", str(lab["root"] / "bisect")),
                       cwd=lab["repo"], env=clean_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = last_json(r.stdout)
    assert out["first_bad"] == shas[17], r.stdout
    # The confirming probe (16 vs 20), then 18 and 17: each printed with its verdict.
    assert [p["commit"] for p in out["trials"]] == [shas[20], shas[18], shas[17]]
    assert all(p["verdict"] == "worse" for p in out["trials"]) and r.stdout.count("trial ") == 3


def test_an_acknowledgement_silences_the_alert_and_shows_its_reason(lab, tmp_path):
    repo, shas = lab["repo"], lab["shas"]
    (repo / "benchmarks" / "acknowledgements.toml").write_text(
        f'[[acknowledge]]\ncommits = "{shas[17][:10]}"\nfigure = "ms/token"\narm = "classic"\nreason = "{REASON}"\n')
    commit_all(repo, "acknowledge the verify change")
    h, commits = _history(lab)
    (found,) = [f for f in h.found if f.step.direction == "regression"]
    assert found.ack is not None and found.ack.reason == REASON
    assert file_alerts(h, commits, tmp_path / "alerts", None) == []
    # The PR comment: a check of 16..17 whose classic ms/token is worse reads pass, with the reason.
    from test_asv_harness import _cmp

    from harness.ci import pullrequest
    c = _cmp(1.3)
    acks, covered = acks_for_check(repo, repo / "benchmarks" / "acknowledgements.toml", shas[16], shas[17])
    assert covered == [shas[17]]
    c.apply_acks(acks, covered)
    assert c.exit_status == 0 and c.headline().startswith("pass") and REASON in c.headline()
    md = pullrequest.render_markdown(c, {"machine": MACHINE, "host": {}, "command": "harness pr-check", "duration_s": 1.0})
    row = next(x for x in md.splitlines() if x.startswith("| classic ms/token |"))
    assert row.endswith("| slower, acknowledged |") and "% slower on classic ms/token (+" in md.splitlines()[3]
    assert md.splitlines()[3].count(", acknowledged") == 1 and "- classic ms/token +" in md and REASON in md
    # The report of two records made at 16 and 20: the reason beside the before-and-after.
    from test_report import AFTER, RECORD, load, render, section, write
    a, b = load(RECORD), load(AFTER)
    a["host"]["repo"] = {"path": str(repo), "commit": shas[16]}
    b["host"]["repo"] = {"path": str(repo), "commit": shas[20]}
    md = render(write(tmp_path, "a.json", a), write(tmp_path, "b.json", b))
    assert f"arm classic, figure ms/token): {REASON}" in section(md, "Before and after")
