"""Output paths and the checks before any work: through the real CLI, in this process.

A command's outputs never replace what the user has (a record, baselines, another harness JSON
file, a README the harness did not write), a path that cannot be written is one line and exit 2
before anything is measured, and a failed write leaves the earlier file whole. The setup checks
of the checks (--repo, --work, $HARNESS_ASV_SUITE, --machine) and a few commands' bad input are
one line too.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness_helpers import (
    REPO,
    asv_project,
    cli_in_process,
    command_arm,
    one_line,
    snapshot,
    whole_record,
    write_suite,
)

from harness.core.errors import UserError

RECORD_FX = REPO / "tests" / "fixtures" / "report" / "record.json"
SUITE = REPO / "benchmarks" / "suite.toml"


def _record(t: Path, name: str = "rec.json") -> Path:
    p = t / name
    p.write_bytes(RECORD_FX.read_bytes())
    return p


def _text(t: Path, name: str, text: str) -> Path:
    p = t / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def _reports(t: Path) -> Path:
    d = t / "reports"
    d.mkdir(exist_ok=True)
    _record(d, "rec.json")
    return d


def _reports_with_readme(t: Path) -> Path:
    d = _reports(t)
    _text(d, "README.md", "# Lab notes\n\nwhat we measure and why\n")
    return d


def _machines(t: Path) -> Path:
    """A machine file that knows 'm', and asv results of another machine 'r' in the project."""
    mf = t / "machines.json"
    mf.write_text(json.dumps({"version": 1, "m": {"machine": "m", "arch": "x86_64"}}))
    (t / "proj" / "results" / "r").mkdir(parents=True)
    (t / "proj" / "results" / "r" / "machine.json").write_text(json.dumps({"machine": "r", "version": 1}))
    return mf


@dataclass
class Case:
    name: str
    argv: Callable[[Path], list[str]]
    says: str
    cwd: Callable[[Path], Path] | None = None
    env: dict[str, str] | None = None


CASES = [
    # Outputs that would replace the user's files.
    Case("report over its own record", lambda t: ["report", str(_record(t)), "--out", str(t / "rec.json")],
         "rec.json: holds a harness.record; writing the report there would replace it"),
    Case("report over baselines",
         lambda t: ["report", str(_record(t)), "--out",
                    str(_text(t, "b.json", json.dumps({"schema_version": 1, "kind": "harness.baselines"})))],
         "holds a harness.baselines"),
    Case("report over a record's run journal",
         lambda t: ["report", str(_record(t)), "--out", str(_text(t, "x.json.journal", '{"index": 0}\n'))],
         "holds a record's run journal"),
    Case("index over a record of the reports directory",
         lambda t: ["report", "--index", "--reports-dir", str(_reports(t)), "--out", str(t / "reports" / "rec.json")],
         "holds a harness.record; writing the index there would replace it"),
    Case("index over the user's own README",
         lambda t: ["report", "--index", "--reports-dir", str(_reports_with_readme(t))],
         "README.md: not an index `harness report --index` wrote (its first line is '# Lab notes')"),
    Case("pr-check output over a record",
         lambda t: ["pr-check", "HEAD~1", "HEAD", "--suite", str(SUITE), "--no-asv", "--output", str(_record(t))],
         "holds a harness.record; writing the Markdown (--output) there would replace it", cwd=asv_project),
    Case("pr-check json over a record",
         lambda t: ["pr-check", "HEAD~1", "HEAD", "--suite", str(SUITE), "--no-asv", "--json", str(_record(t))],
         "holds a harness.record; writing the JSON (--json) there would replace it", cwd=asv_project),
    Case("pr-check output and json the same file",
         lambda t: ["pr-check", "HEAD~1", "HEAD", "--suite", str(SUITE), "--no-asv", "--output", str(t / "o"),
                    "--json", str(t / "o")], "--output and --json name the same file", cwd=asv_project),
    Case("changes json over a record", lambda t: ["changes", "--json", str(_record(t))],
         "holds a harness.record; writing the changes JSON (--json) there would replace it", cwd=asv_project),
    # Outputs that cannot be written: said before anything is measured.
    Case("report to a device", lambda t: ["report", str(_record(t)), "--out", "/dev/full"],
         "/dev/full: the report path is not a regular file"),
    Case("pr-check json a directory",
         lambda t: ["pr-check", "HEAD~1", "HEAD", "--suite", str(SUITE), "--json", str(t),
                    "--machine-file", str(t / "m.json")], "the JSON (--json) path is a directory", cwd=asv_project),
    Case("pr-check output under a file",
         lambda t: ["pr-check", "HEAD~1", "HEAD", "--suite", str(SUITE), "--output",
                    str(_text(t, "file.md", "x")) + "/x.md", "--machine-file", str(t / "m.json")],
         "file.md is a file, not a directory", cwd=asv_project),
    Case("changes json a directory", lambda t: ["changes", "--json", str(t)],
         "the changes JSON (--json) path is a directory", cwd=asv_project),
    Case("compare-commits work a file",
         lambda t: ["compare-commits", "HEAD~1", "HEAD", "--suite", str(SUITE), "--work", str(_text(t, "w", "x"))],
         "the work directory (--work) is a file, not a directory", cwd=asv_project),
    Case("bisect work under a file",
         lambda t: ["bisect", "HEAD~1", "HEAD", "--arm", "classic", "--suite", str(SUITE), "--work",
                    str(_text(t, "w", "x")) + "/sub"], "w is a file, not a directory", cwd=asv_project),
    Case("schema write into a file", lambda t: ["schema", "--dir", str(_record(t)), "--write"],
         "the schema directory (--dir) is a file, not a directory"),
    # Setup the checks read.
    Case("compare-commits repo missing", lambda t: ["compare-commits", "HEAD~1", "HEAD", "--suite", str(SUITE),
                                                    "--repo", str(t / "nonexist")], "nonexist: no such directory"),
    Case("bisect repo not a git repository",
         lambda t: ["bisect", "HEAD~1", "HEAD", "--arm", "classic", "--suite", str(SUITE), "--repo", str(t)],
         "not a git repository"),
    Case("compare-commits suite variable names no file", lambda t: ["compare-commits", "HEAD~1", "HEAD"],
         "nope.toml: suite file not found (named by $HARNESS_ASV_SUITE", cwd=asv_project,
         env={"HARNESS_ASV_SUITE": "nope.toml"}),
    Case("bisect suite variable names no file", lambda t: ["bisect", "HEAD~1", "HEAD", "--arm", "classic"],
         "nope.toml: suite file not found (named by $HARNESS_ASV_SUITE", cwd=asv_project,
         env={"HARNESS_ASV_SUITE": "nope.toml"}),
    Case("changes unknown machine",
         lambda t: ["changes", "--machine", "nosuch", "--machine-file", str(_machines(t))],
         "no machine named 'nosuch'", cwd=asv_project),
    # Other commands' bad input.
    Case("schema check of a missing directory", lambda t: ["schema", "--dir", str(t / "nonexist"), "--check"],
         "nonexist: no such directory"),
    Case("init with an unterminated quote",
         lambda t: ["init", "--dir", str(t / "proj"), "--harness-spec", "x", "--hosts", "linux-cpu",
                    "--command", 'python "unterminated'],
         "cannot split it like a shell (No closing quotation)", cwd=asv_project),
    Case("init into a missing directory", lambda t: ["init", "--dir", str(t / "nonexist")],
         "nonexist: no such directory"),
    Case("dashboard preview before a publish", lambda t: ["dashboard", "preview"],
         "html: nothing published yet; run `harness dashboard publish` first", cwd=asv_project),
    Case("report of a JSON list", lambda t: ["report", str(_text(t, "l.json", "[1, 2]"))],
         "l.json: not a harness.record file: it holds a JSON list, not a JSON object"),
    Case("report of a record without schema_version",
         lambda t: ["report", str(_text(t, "r.json", json.dumps({k: v for k, v in json.loads(
             RECORD_FX.read_text()).items() if k != "schema_version"})))],
         "harness.record file without a schema_version field"),
    Case("report of a record with a string schema_version",
         lambda t: ["report", str(_text(t, "r.json", json.dumps({**json.loads(RECORD_FX.read_text()),
                                                                  "schema_version": "4"})))],
         "invalid schema_version '4'"),
]


def _no_measuring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any check, bisection or asv run that starts fails the test: every case must stop before."""
    def boom(*a, **k):
        raise AssertionError("measuring (or asv) started before the one-line error")
    import harness.ci.pullrequest
    import harness.cli.bisect
    import harness.cli.compare_commits
    import harness.cli.dashboard
    for mod, name in ((harness.ci.pullrequest, "compare_commits"), (harness.cli.compare_commits, "compare_commits"),
                      (harness.cli.bisect, "bisect"), (harness.cli.dashboard, "run_asv")):
        monkeypatch.setattr(mod, name, boom)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_output_or_setup_is_one_line_exit_2_before_any_work(case: Case, tmp_path: Path, monkeypatch,
                                                                capsys) -> None:
    if case.name == "report to a device" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    _no_measuring(monkeypatch)
    monkeypatch.delenv("HARNESS_ASV_SUITE", raising=False)
    for k, v in (case.env or {}).items():
        monkeypatch.setenv(k, v)
    cwd = case.cwd(tmp_path) if case.cwd else tmp_path
    argv = case.argv(tmp_path)
    before = snapshot(tmp_path)
    line = one_line(cli_in_process(argv, cwd, monkeypatch, capsys))
    assert case.says in line, line
    after = snapshot(tmp_path)
    assert {k: after.get(k) for k in before} == before, "a file that was there changed"


# --- what may be replaced ---------------------------------------------------------------------

def test_a_report_rendered_again_replaces_the_earlier_markdown(tmp_path, monkeypatch, capsys) -> None:
    rec = _record(tmp_path)
    # An earlier output of `harness report`: its marker is its last line.
    out = _text(tmp_path, "rec.md", "an earlier rendering\n\n<!-- written by harness report; replaced on the next run -->\n")
    os.chmod(out, 0o644)
    r = cli_in_process(["report", str(rec), "--out", str(out)], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("# report-fixture on linux-cpu")
    assert out.stat().st_mode & 0o777 == 0o644, "the atomic write kept the file's mode"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], "a temp file was left"


def test_the_index_replaces_an_earlier_index_and_writes_a_new_one(tmp_path, monkeypatch, capsys) -> None:
    d = _reports(tmp_path)
    r = cli_in_process(["report", "--index", "--reports-dir", str(d)], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    first = (d / "README.md").read_text()
    assert first.startswith("# Benchmark records\n")
    (d / "README.md").write_text(first.replace("newest first", "EDITED"))
    r = cli_in_process(["report", "--index", "--reports-dir", str(d)], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    assert (d / "README.md").read_text() == first
    # The user's own README stays; --out puts the index elsewhere.
    (d / "README.md").write_text("# Lab notes\n\nours\n")
    r = cli_in_process(["report", "--index", "--reports-dir", str(d), "--out", str(d / "INDEX.md")], tmp_path,
             monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    assert (d / "README.md").read_text() == "# Lab notes\n\nours\n"
    assert (d / "INDEX.md").read_text() == first


def test_a_failed_write_leaves_the_earlier_file_whole(tmp_path, monkeypatch) -> None:
    from harness.collect import files
    out = _text(tmp_path, "r.md", "earlier\n")

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(files.os, "replace", full)
    with pytest.raises(UserError, match=r"r\.md: cannot write the report \(No space left on device\); "
                                        r"the file there, if any, is unchanged"):
        files.write_output(out, "new text\n", "report")
    assert out.read_text() == "earlier\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.md"], "the temp file was left behind"


def test_check_output_lets_a_command_replace_its_own_json(tmp_path) -> None:
    from harness.collect.files import check_output
    own = _text(tmp_path, "c.json", json.dumps({"kind": "harness.changes", "steps": []}))
    check_output(own, "changes JSON", own_kind="harness.changes")
    with pytest.raises(UserError, match="holds a harness.changes; writing the pr-check JSON there"):
        check_output(own, "pr-check JSON", own_kind="harness.pr-check")
    check_output(_text(tmp_path, "plain.json", '{"kind": "not ours"}'), "report")   # not a harness kind


def _stub_comparison(tmp_path: Path):
    """What compare_commits returns, from synthetic paired runs judged by the real code."""
    from harness.analyze.design import Design
    from harness.ci import twocommits
    runs = []
    for rep in range(8):
        runs.append({"index": rep, "arm": "classic", "prompt": "p", "repetition": rep, "warmup": False, "status": "ok",
                     "ms_per_token": 2.0 + 0.01 * (rep % 3), "diagnostics": {"mode": "classic", "rounds": 0},
                     "identity": {"status": "identical"}, "marks": []})
    design = Design(threshold=0.10, alpha=0.05, looks=1, figures=1)
    figs = twocommits.judge(runs, runs, ["classic"], design)
    recs = {}
    for side in ("base", "head"):
        recs[side] = str(_text(tmp_path, f"{side}.json", json.dumps(whole_record(runs=runs))))
    return twocommits.Comparison("a" * 40, "b" * 40, design, figs, [], {}, recs,
                              {"rounds": 8, "stopped": "resolved", "stopped_because": "resolved"}, 10.0)


def test_pr_check_replaces_its_earlier_outputs_after_the_check(tmp_path, monkeypatch, capsys) -> None:
    from harness.ci import pullrequest
    proj = asv_project(tmp_path)
    c = _stub_comparison(tmp_path)
    monkeypatch.setattr(pullrequest, "compare_commits", lambda *a, **k: c)
    md = _text(tmp_path, "comment.md", "the last check's comment\n\n<!-- written by harness pr-check; replaced on the next run -->\n")
    js = _text(tmp_path, "check.json", json.dumps({"kind": "harness.pr-check", "exit_status": 1}))
    r = cli_in_process(["pr-check", "HEAD~1", "HEAD", "--suite", str(SUITE), "--no-asv", "--output", str(md),
              "--json", str(js)], proj, monkeypatch, capsys)
    assert r.returncode == c.exit_status, r.stderr
    assert md.read_text().startswith("<!-- harness-pr-check:local -->")
    assert json.loads(js.read_text())["kind"] == "harness.pr-check"


def test_changes_json_says_its_kind_and_replaces_an_earlier_one(tmp_path, monkeypatch, capsys) -> None:
    proj = asv_project(tmp_path)
    mf = _machines(tmp_path)
    out = tmp_path / "changes.json"
    for _ in range(2):
        r = cli_in_process(["changes", "--machine", "r", "--machine-file", str(mf), "--json", str(out)], proj,
                 monkeypatch, capsys)
        assert r.returncode == 0, r.stderr
        data = json.loads(out.read_text())
        assert data["kind"] == "harness.changes" and data["machine"] == "r"
    line = one_line(cli_in_process(["changes", "--machine", "nosuch", "--machine-file", str(mf)], proj, monkeypatch, capsys))
    assert "(known: m, r; pass one of those to --machine)" in line, line


# --- $HARNESS_ASV_SUITE for compare-commits and bisect -------------------------------------------

@pytest.mark.parametrize("command", ["compare-commits", "bisect"])
def test_compare_commits_and_bisect_take_the_suite_from_the_variable(command, tmp_path, monkeypatch,
                                                                     capsys) -> None:
    import harness.cli.bisect
    import harness.cli.compare_commits
    proj = asv_project(tmp_path)
    suite = write_suite(tmp_path, [command_arm("classic")], name="from-variable")
    seen = {}

    def stop(repo, a, b, *rest, **kw):
        seen["suite"] = next(x for x in rest if hasattr(x, "settings"))
        raise UserError("stopped here")
    monkeypatch.setattr(harness.cli.compare_commits, "compare_commits", stop)
    monkeypatch.setattr(harness.cli.bisect, "bisect", stop)
    monkeypatch.setenv("HARNESS_ASV_SUITE", str(suite))
    extra = ["--arm", "classic"] if command == "bisect" else []
    lines = _stopped(cli_in_process([command, "HEAD~1", "HEAD", *extra], proj, monkeypatch, capsys))
    assert lines[0].startswith(f"harness: measuring suite {suite} in ")   # says which suite
    assert seen["suite"].name == "from-variable"
    # --suite still wins over the variable.
    _stopped(cli_in_process([command, "HEAD~1", "HEAD", *extra, "--suite", str(SUITE)], proj, monkeypatch, capsys))
    assert seen["suite"].name != "from-variable"
    # Neither: the suite the repository's asv.conf.json names (its own engine's), not the
    # packaged one, which once ran the embedded pair in an engine repository without MLX.
    monkeypatch.delenv("HARNESS_ASV_SUITE")
    _stopped(cli_in_process([command, "HEAD~1", "HEAD", *extra], proj, monkeypatch, capsys))
    assert Path(seen["suite"].path).resolve() == (proj / "benchmarks" / "suite.toml").resolve()



def _stopped(r: subprocess.CompletedProcess) -> list[str]:
    """The stub's one-line stop, after the line naming the suite being measured."""
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and lines[-1] == "harness: stopped here" and len(lines) == 2, r.stderr[-2000:]
    return lines
