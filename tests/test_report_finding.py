"""The report's first screen over every committed record: the finding says each arm's paired
verdict in verdictwords' words and nothing else, a declined arm gets no speed, the first screen
fits 150 lines for the default suite and the MTP studies, and every figure it links is written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from harness_helpers import REPO, run_cli

from harness.analyze import verdict as V
from harness.analyze.verdict import judge
from harness.ci import reportfiles
from harness.cli.report import backfill
from harness.core.schema import load_record
from harness.render import reportcontext as rp
from harness.render import verdictwords as W

RECORDS = sorted((REPO / "reports").glob("*.json"))
NO_USER_TEMPLATES = REPO / "tests" / "fixtures" / "report" / "no-such-templates"
FIRST_SCREEN_LINES = 150
# A speed against classic as the report writes one: "0.93x", "1.05x".
SPEED = re.compile(r"\b\d+\.\d+x\b")


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def rendered(path: Path, figures: bool = False) -> str:
    """The record's report; figures: with its figure links (drawing them takes seconds a record)."""
    rel = str(path.relative_to(REPO))
    ctx = reportfiles.report_files(rel, None, path.with_suffix(".md"), backfill())[0] if figures else reportfiles.context_for(rel, backfill=backfill())
    return rp.render(ctx, "record", user_dir=NO_USER_TEMPLATES)


def first_screen(md: str) -> str:
    assert "\n## Appendix\n" in md
    return md.split("\n## Appendix\n", 1)[0]


def finding_of(md: str) -> str:
    return md.split("\n\n")[1]


def named(arm: str, text: str) -> bool:
    """Whether `text` names `arm` itself (not only an arm whose name starts with it)."""
    return re.search(rf"(?<![\w-]){re.escape(arm)}(?![\w-])", text) is not None


def verdicts(path: Path) -> list[V.ArmVerdict]:
    return judge(load_record(json.loads(path.read_text()), str(path))).arms


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_the_finding_says_each_named_arm_in_verdictwords_words(path: Path) -> None:
    md = rendered(path)
    finding = finding_of(md)
    assert finding.count(". ") + 1 <= 3, finding        # at most three sentences
    judged = verdicts(path)
    listed = [v for v in judged if named(v.arm, finding)]
    assert listed, "the finding names no arm"
    for v in listed:
        if v.outcome == V.REFERENCE:
            continue
        assert W.phrase(v) in finding or f"{v.arm} {W.cell(v)}" in finding, (v.arm, finding)
    # The arms table gives every arm its verdictwords cell, and nothing else judges.
    table = md.split("\n\n")[2].splitlines()
    for v in judged:
        row = next(r for r in table if r.startswith(f"| {v.arm} |"))
        assert f"| {W.cell(v)} |" in row and f"| {W.label(v)} |" in row


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_a_declined_arm_has_no_speed_on_the_first_screen(path: Path) -> None:
    md = rendered(path)
    screen = first_screen(md)
    for v in verdicts(path):
        if v.outcome != V.DECLINED:
            continue
        for line in md.splitlines():        # its rows anywhere, the appendix's per-prompt table too
            if line.startswith(f"| {v.arm} |"):
                assert not SPEED.search(line), line
        for clause in re.split(r"[;,.] ", finding_of(screen)):
            if named(v.arm, clause):
                assert not SPEED.search(clause), clause


def test_a_paired_verdict_and_the_unpaired_tok_s_never_disagree_in_the_finding() -> None:
    # The default suite's block3-inexact: unpaired medians once ranked it, the paired check judges it.
    path = next(p for p in RECORDS if "default" in p.name)
    v = next(x for x in verdicts(path) if x.arm == "block3-inexact")
    finding = finding_of(rendered(path))
    assert W.phrase(v) in finding
    assert "tok/s" not in finding and "geometric mean" not in finding


@pytest.mark.parametrize("path", [p for p in RECORDS if "default" in p.name or "mtp-study" in p.name],
                         ids=lambda p: p.name)
def test_the_first_screen_fits_150_lines(path: Path) -> None:
    screen = first_screen(rendered(path, figures=True))
    assert len(screen.splitlines()) <= FIRST_SCREEN_LINES
    assert screen.count("\n## ") <= 8 and "\n### " not in screen     # one table per study section


def test_the_finding_leads_with_a_faster_arm_and_says_its_caveats(tmp_path: Path) -> None:
    from harness.render.finding import finding
    j = judge(load_record(json.loads((REPO / "reports" / "20261205-032041-mtp-study-h200.json").read_text()), "x"))
    text, short = finding(j, "90 of 95 planned runs")
    best = j.best()
    assert text.startswith(f"No speculative arm is resolved faster than classic decode: the best, {best.arm}, "
                           f"{W.phrase(best)}")
    assert "Caveats: the record is incomplete (90 of 95 planned runs)" in text
    assert f"{best.arm} is {W.label(best)}" in text
    assert short.startswith("Incomplete record. No speculative arm is resolved faster")


def test_every_figure_link_points_to_a_file_written_beside_the_report(tmp_path: Path) -> None:
    pytest.importorskip("harness.render.figures")
    path = next(p for p in RECORDS if "default" in p.name)
    out = tmp_path / "default.md"
    r = run_cli("report", str(path), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    md = out.read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(links) >= 4
    for link in links:
        svg = out.parent / link
        assert svg.is_file() and svg.read_text().lstrip().startswith(("<?xml", "<svg")), link
    # A second rendering replaces its own figures; a file the harness did not write is kept.
    (out.parent / links[0]).write_text("<svg>mine</svg>\n")
    r = run_cli("report", str(path), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 2 and "not written by harness report" in r.stderr
    assert (out.parent / links[0]).read_text() == "<svg>mine</svg>\n"
