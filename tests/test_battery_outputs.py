"""The battery: the harness never replaces a file it did not write, through the real CLI in this process.

Every text output carries a marker as its last line (an HTML comment, invisible in rendered
Markdown); every JSON output its "kind". Before writing, an existing file without its own
command's mark is refused in one line and left as it was; an earlier output of the same command,
an empty file, or (for a report or an index) an unmarked file starting with the line about to be
written (an earlier rendering from before markers, or stdout redirected) is replaced. Paths the
harness keeps for its own files (a record's journal, locks, temp files) and paths that are not
regular files are refused, and compare-commits checks what it can before it says or makes anything.
"""

from __future__ import annotations

import json
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

RECORD_FX = REPO / "tests" / "fixtures" / "report" / "record.json"
SUITE = REPO / "benchmarks" / "suite.toml"
NOTES = "# Lab notes\n\nwhat we measure and why\n"
REPORT_MARK = "<!-- written by harness report; replaced on the next run -->"


def _file(t: Path, name: str, data: str | bytes) -> Path:
    p = t / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


def _record(t: Path, name: str = "rec.json") -> Path:
    return _file(t, name, RECORD_FX.read_bytes())


def _no_measuring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any measuring or bisection that starts fails the test: every refusal comes before."""
    def boom(*a, **k):
        raise AssertionError("measuring started before the one-line error")
    import harness.ci.pullrequest
    import harness.cli.bisect
    import harness.cli.compare_commits
    for mod, name in ((harness.ci.pullrequest, "compare_commits"), (harness.cli.compare_commits, "compare_commits"),
                      (harness.cli.bisect, "bisect")):
        monkeypatch.setattr(mod, name, boom)


@dataclass
class Case:
    name: str
    argv: Callable[[Path], list[str]]
    says: str
    project: bool = False        # run in a git project (pr-check, changes, compare-commits)


def _pr(t: Path, *extra: str) -> list[str]:
    return ["pr-check", "HEAD~1", "HEAD", "--suite", str(SUITE), "--no-asv", *extra]


REFUSED = [
    # A file the user has, at each output path: refused, untouched.
    Case("report out over the user's notes", lambda t: ["report", str(_record(t)), "--out", str(_file(t, "notes.md", NOTES))],
         "notes.md: not written by harness report; writing the report there would replace it; "
         "pass another path or remove it"),
    Case("report out over a user's JSON file",
         lambda t: ["report", str(_record(t)), "--out", str(_file(t, "data.json", '{"kind": "not ours"}'))],
         "data.json: not written by harness report"),
    Case("report out over a binary file",
         lambda t: ["report", str(_record(t)), "--out", str(_file(t, "img.png", b"\x89PNG\r\n\x1a\n\x00\xff"))],
         "img.png: not written by harness report"),
    Case("report out over notes quoting the marker mid-file",
         lambda t: ["report", str(_record(t)), "--out", str(_file(t, "n.md", f"{REPORT_MARK}\n\nmy own notes\n"))],
         "n.md: not written by harness report"),
    Case("report out over an index",
         lambda t: ["report", str(_record(t)), "--out",
                    str(_file(t, "i.md", "# Benchmark records\n\n<!-- written by harness report --index; "
                                         "replaced on the next run -->\n"))],
         "i.md: not written by harness report;"),
    Case("index out over the user's notes",
         lambda t: ["report", "--index", "--reports-dir", str(_record(t, "reports/r.json").parent), "--out",
                    str(_file(t, "notes.md", NOTES))],
         "notes.md: not written by harness report --index; writing the index there would replace it"),
    Case("pr-check output over the user's notes", lambda t: _pr(t, "--output", str(_file(t, "notes.md", NOTES))),
         "notes.md: not written by harness pr-check; writing the Markdown (--output) there", project=True),
    Case("pr-check json over a user's JSON file", lambda t: _pr(t, "--json", str(_file(t, "u.json", '{"a": 1}'))),
         "u.json: not written by harness pr-check; writing the JSON (--json) there", project=True),
    Case("changes json over a user's JSON file",
         lambda t: ["changes", "--json", str(_file(t, "u.json", '{"steps": "mine"}'))],
         "u.json: not written by harness changes; writing the changes JSON (--json) there", project=True),
    Case("schema write over a user's file of the same name",
         lambda t: ["schema", "--write", "--dir", str(_file(t, "s/record.schema.json", '{"title": "ours"}').parent)],
         "record.schema.json: not written by harness schema --write"),
    # Paths that are not regular files.
    Case("run record to /dev/null", lambda t: ["run", str(write_suite(t, [command_arm("a")])), "--record", "/dev/null"],
         "/dev/null: the record path is not a regular file"),
    Case("baseline record to /dev/null",
         lambda t: ["baseline", "record", str(write_suite(t, [command_arm("a")])), "--record", "/dev/null"],
         "/dev/null: the record path is not a regular file"),
    Case("report out to /dev/null", lambda t: ["report", str(_record(t)), "--out", "/dev/null"],
         "/dev/null: the report path is not a regular file"),
    # Names the harness keeps for its own files beside another.
    Case("report out named like a journal", lambda t: ["report", str(_record(t)), "--out", str(t / "x.json.journal")],
         "x.json.journal: named like a record's run journal"),
    Case("report out named like a lock", lambda t: ["report", str(_record(t)), "--out", str(t / ".r.md.lock")],
         ".r.md.lock: named like a harness lock or temp file"),
    Case("report out named like a temp file",
         lambda t: ["report", str(_record(t)), "--out", str(t / ".r.md.4242.abcd1234.tmp")],
         "named like a harness lock or temp file"),
    Case("run record named like another record's journal",
         lambda t: ["run", str(write_suite(t, [command_arm("a")])), "--record", str(_record(t).with_name("rec.json.journal"))],
         "rec.json.journal: named like a record's run journal"),
    Case("pr-check json named like a journal", lambda t: _pr(t, "--json", str(t / "c.json.journal")),
         "c.json.journal: named like a record's run journal", project=True),
    Case("changes json named like a journal", lambda t: ["changes", "--json", str(t / "c.json.journal")],
         "c.json.journal: named like a record's run journal", project=True),
    # compare-commits and bisect: everything they can check, before they say or make anything.
    Case("compare-commits unknown head", lambda t: ["compare-commits", "HEAD", "nosuch", "--suite", str(SUITE)],
         "unknown commit 'nosuch'", project=True),
    Case("compare-commits unknown base with a work directory",
         lambda t: ["compare-commits", "nosuch", "HEAD", "--suite", str(SUITE), "--work", str(t / "w")],
         "unknown commit 'nosuch'", project=True),
    Case("bisect unknown bad commit",
         lambda t: ["bisect", "HEAD~1", "nosuch", "--arm", "classic", "--suite", str(SUITE)],
         "unknown commit 'nosuch'", project=True),
    Case("compare-commits malformed acknowledgements",
         lambda t: ["compare-commits", "HEAD~1", "HEAD", "--suite", str(SUITE)],
         "acknowledgements.toml", project=True),
    Case("compare-commits bad baselines file",
         lambda t: ["compare-commits", "HEAD~1", "HEAD", "--suite", str(SUITE), "--baselines",
                    str(_file(t, "b.json", "[1, 2]"))],
         "b.json: not a harness.baselines file", project=True),
]


@pytest.mark.parametrize("case", REFUSED, ids=[c.name for c in REFUSED])
def test_refused_in_one_line_and_nothing_changed(case: Case, tmp_path: Path, monkeypatch, capsys) -> None:
    _no_measuring(monkeypatch)
    monkeypatch.delenv("HARNESS_ASV_SUITE", raising=False)
    cwd = tmp_path
    if case.project:
        cwd = asv_project(tmp_path)
        if "acknowledgements" in case.says:
            _file(cwd, "benchmarks/acknowledgements.toml", "[[acknowledge]]\ncommits = 'nosuch'\n")
    argv = case.argv(tmp_path)
    before = snapshot(tmp_path, dirs=True)
    line = one_line(cli_in_process(argv, cwd, monkeypatch, capsys))
    assert case.says in line, line
    after = snapshot(tmp_path, dirs=True)
    assert {k: after.get(k) for k in before} == before, "a file that was there changed"
    assert sorted(set(after) - set(before)) == [], "something was made"


# --- what may be replaced ----------------------------------------------------------------------

def _report(tmp: Path, monkeypatch, capsys, *extra: str) -> subprocess.CompletedProcess:
    r = cli_in_process(["report", str(_record(tmp)), *extra], tmp, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    return r


def _without_figures(md: str) -> str:
    """A report written with --out, less the Figures section its files beside it add (stdout has
    no place for them)."""
    head, sep, rest = md.partition("\n## Figures\n")
    return head + "\n## " + rest.split("\n## ", 1)[1] if sep else md


def test_report_out_is_stdout_plus_its_marker_as_the_last_line(tmp_path, monkeypatch, capsys) -> None:
    out = tmp_path / "r.md"
    _report(tmp_path, monkeypatch, capsys, "--out", str(out))
    stdout = _report(tmp_path, monkeypatch, capsys).stdout
    assert "\n## Figures\n" in out.read_text() and (tmp_path / "r").is_dir()
    assert _without_figures(out.read_text()) == stdout.rstrip("\n") + "\n\n" + REPORT_MARK + "\n"
    assert REPORT_MARK not in stdout          # stdout is the user's: no marker there


@pytest.mark.parametrize("earlier", ["own earlier output", "empty file", "stdout redirected into it",
                                     "rendering from before markers, edited below the title"])
def test_report_out_replaces(earlier: str, tmp_path, monkeypatch, capsys) -> None:
    out = tmp_path / "r.md"
    stdout = _report(tmp_path, monkeypatch, capsys).stdout
    if earlier == "own earlier output":
        _report(tmp_path, monkeypatch, capsys, "--out", str(out))
        out.write_text(out.read_text().replace("## Setup", "## Setup (edited)"))
    elif earlier == "empty file":
        out.write_text("")
    elif earlier == "stdout redirected into it":
        out.write_text(stdout)
    else:
        out.write_text(stdout.split("\n", 1)[0] + "\n\nan older rendering\n")
    _report(tmp_path, monkeypatch, capsys, "--out", str(out))
    assert _without_figures(out.read_text()) == stdout.rstrip("\n") + "\n\n" + REPORT_MARK + "\n"


def test_index_out_replaces_its_own_earlier_index(tmp_path, monkeypatch, capsys) -> None:
    d = _record(tmp_path, "reports/r.json").parent
    out = tmp_path / "INDEX.md"
    for _ in range(2):
        r = cli_in_process(["report", "--index", "--reports-dir", str(d), "--out", str(out)], tmp_path, monkeypatch,
                           capsys)
        assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("# Benchmark records\n")
    assert out.read_text().endswith("<!-- written by harness report --index; replaced on the next run -->\n")


def test_schema_write_replaces_its_own_files(tmp_path, monkeypatch, capsys) -> None:
    d = tmp_path / "schema"
    for _ in range(2):
        r = cli_in_process(["schema", "--write", "--dir", str(d)], tmp_path, monkeypatch, capsys)
        assert r.returncode == 0, r.stderr
    r = cli_in_process(["schema", "--check", "--dir", str(d)], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stdout


def test_pr_check_output_carries_its_marker_and_is_replaced_next_time(tmp_path, monkeypatch, capsys) -> None:
    from harness.analyze.design import Design
    from harness.ci import pullrequest, twocommits
    proj = asv_project(tmp_path)
    runs = [{"index": rep, "arm": "classic", "prompt": "p", "repetition": rep, "warmup": False, "status": "ok",
             "ms_per_token": 2.0 + 0.01 * (rep % 3), "diagnostics": {"mode": "classic", "rounds": 0},
             "identity": {"status": "identical"}, "marks": []} for rep in range(8)]
    design = Design(threshold=0.10, alpha=0.05, looks=1, figures=1)
    recs = {side: str(_file(tmp_path, f"{side}.json", json.dumps(whole_record(runs=runs))))
            for side in ("base", "head")}
    c = twocommits.Comparison("a" * 40, "b" * 40, design, twocommits.judge(runs, runs, ["classic"], design), [], {}, recs,
                           {"rounds": 8, "stopped": "resolved", "stopped_because": "resolved"}, 10.0)
    monkeypatch.setattr(pullrequest, "compare_commits", lambda *a, **k: c)
    md, js = tmp_path / "comment.md", tmp_path / "check.json"
    for _ in range(2):
        r = cli_in_process(_pr(tmp_path, "--output", str(md), "--json", str(js)), proj, monkeypatch, capsys)
        assert r.returncode == c.exit_status, r.stderr
    text = md.read_text()
    assert text.startswith("<!-- harness-pr-check:local -->")      # the workflow finds its comment by it
    assert text.endswith("<!-- written by harness pr-check; replaced on the next run -->\n")


def test_render_missing_keeps_a_readme_the_index_did_not_write(tmp_path, capsys) -> None:
    from harness.ci.reportfiles import render_missing
    d = _record(tmp_path, "records/r.json").parent
    readme = _file(d, "README.md", NOTES)
    assert render_missing(d) == 1
    assert readme.read_text() == NOTES and "kept" in capsys.readouterr().err
    assert (d / "r.md").read_text().endswith(REPORT_MARK + "\n")
    readme.unlink()
    render_missing(d)
    render_missing(d)                      # its own index: replaced
    assert (d / "README.md").read_text().startswith("# Benchmark records\n")
