"""One verdict per question, told the same way everywhere: for every committed record and for
synthetic records made from a real one (resolved slower, resolved faster, the same, inconclusive,
declined, overridden, incomplete), each arm's verdict as the report's finding and arms table,
the terminal summary, the --json summary and the dashboard's host page give it is the one
harness.analyze.verdict.judge() reads, and no output gives an arm a verdict word of another
outcome."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from harness_helpers import REPO

from harness.analyze import verdict as V
from harness.analyze.series import SiteData, commit_view, host_series
from harness.analyze.verdict import ArmVerdict, judge
from harness.ci import reportfiles
from harness.cli import output
from harness.cli.report import backfill
from harness.core.schema import Record, load_record
from harness.render import dashboard, termsummary
from harness.render import reportcontext as rp
from harness.render import verdictwords as W
from harness.render.dashboard import badge

COMMITTED = sorted((REPO / "reports").glob("*.json"))
DEFAULT = REPO / "tests" / "fixtures" / "default-suite-linux-cpu.json"   # a real `make bench` record
NO_USER_TEMPLATES = REPO / "tests" / "fixtures" / "report" / "no-such-templates"
ARM = "block3-inexact"          # the default suite's overridden arm: the one the synthetic cases move

# A verdict word and the outcomes it may stand for: an output that gives an arm a word of
# another outcome contradicts the judgement.
WORDS = {"faster": {V.FASTER}, "slower": {V.SLOWER}, "inconclusive": {V.INCONCLUSIVE}, "declined": {V.DECLINED}, "profiled": {V.PROFILED},
         "same": {V.SAME}}


def _load(path: Path) -> dict[str, Any]:
    return load_record(json.loads(path.read_text()), str(path))


def _moved(factor: float | None = None, same: bool = False) -> dict[str, Any]:
    """The real default-suite record with ARM's ms/token scaled by `factor` (or set to its classic
    pair's, within 1%), judged after the session (no sequential looks) and with no contended run."""
    d = copy.deepcopy(_load(DEFAULT))
    d.pop("sequential", None)
    classic = {(r["prompt"], r.get("repetition")): r for r in d["runs"] if r["arm"] == "classic"}
    for r in d["runs"]:
        r["marks"] = [m for m in (r.get("marks") or []) if m != "contended"]
        if r["arm"] != ARM or not isinstance(r.get("ms_per_token"), (int, float)):
            continue
        ref = classic.get((r["prompt"], r.get("repetition")))
        new = ref["ms_per_token"] * (1.0 + 0.002 * (r.get("repetition", 0) % 3 - 1)) if same and ref else \
            r["ms_per_token"] * (factor or 1.0)
        r["decode_tokens_per_s"] = r["decode_tokens_per_s"] * r["ms_per_token"] / new
        r["ms_per_token"] = new
    return d


def _incomplete() -> dict[str, Any]:
    d = copy.deepcopy(_load(DEFAULT))
    d["runs"] = d["runs"][: len(d["runs"]) // 2]
    d["complete"] = False
    d.pop("sequential", None)
    return d


SYNTHETIC = {"slower": (lambda: _moved(1.5), V.SLOWER), "faster": (lambda: _moved(0.6), V.FASTER),
             "same": (lambda: _moved(same=True), V.SAME), "as-measured": (lambda: _load(DEFAULT), None),
             "incomplete": (_incomplete, None)}


def _cases() -> list[tuple[str, Any]]:
    return [(p.name, (lambda p=p: _load(p))) for p in COMMITTED] + \
        [(f"default-{k}", f) for k, (f, _) in SYNTHETIC.items()]


def _named(arm: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(arm)}(?![\w-])", text) is not None


def _report(data: dict[str, Any], tmp: Path) -> str:
    path = tmp / "record.json"
    path.write_text(json.dumps(data))
    return rp.render(reportfiles.context_for(str(path), backfill=backfill()), "record", user_dir=NO_USER_TEMPLATES)


def _arms_rows(md: str) -> dict[str, list[str]]:
    """The first screen's arms table: arm -> its cells."""
    head = md.split("\n## Appendix\n", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in head.splitlines():
        if line.startswith("| ") and "vs classic (paired)" not in line:
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows.setdefault(cells[0], cells)
    return rows


def _terminal(data: dict[str, Any], path: Path) -> tuple[list[str], dict[str, Any]]:
    rec = SimpleNamespace(data=msgspec.convert(data, Record), path=path)   # as collect.record.Record holds it
    s, rows = output.session_summary(rec)
    lines = [t.plain for t in termsummary.summary_lines(s, 80)]
    return lines, output.summary_doc(rec, s, rows)


def _dashboard(data: dict[str, Any]) -> str:
    c = commit_view(data, "record.json", "records/record.html", sha="0" * 40)
    site = SiteData((host_series("host", [(c, data)]),))
    return dashboard.host_page(site, site.hosts[0])


def _contradicts(v: ArmVerdict, text: str) -> list[str]:
    """Verdict words in `text` (what an output says of arm v alone) that belong to another outcome."""
    said = {w for w in WORDS if re.search(rf"\b{w}\b", text)}
    return sorted(w for w in said if v.outcome not in WORDS[w] and w not in W.cell(v))


@pytest.mark.parametrize("name,make", _cases(), ids=[n for n, _ in _cases()])
def test_every_output_gives_each_arm_the_judged_verdict(name: str, make: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    data = make()
    j = judge(data)
    md = _report(data, tmp_path)
    finding = md.split("\n\n")[1]
    rows = _arms_rows(md)
    term, doc = _terminal(data, tmp_path / "record.json")
    page = _dashboard(data)
    by_arm = {d["arm"]: d for d in doc["verdicts"]}
    for v in j.arms:
        cell = W.cell(v)
        # The report: the arms table's verdict cell, and the finding where it names the arm.
        assert v.arm in rows, (name, v.arm, list(rows))
        assert cell in rows[v.arm], (name, v.arm, rows[v.arm], cell)
        assert not _contradicts(v, " ".join(rows[v.arm])), (name, v.arm, rows[v.arm])
        if _named(v.arm, finding) and v.outcome != V.REFERENCE:
            assert cell in finding or W.phrase(v) in finding, (name, v.arm, finding)
        # The terminal: the arm's line(s) carry the same cell (possibly wrapped onto the next line).
        table = term[next(i for i, ln in enumerate(term) if ln.startswith("arm ")):]
        at = next(i for i, ln in enumerate(table) if re.match(rf"{re.escape(v.arm)}( \*\d+)?( |$)", ln))
        block = " ".join(ln.strip() for ln in table[at:at + 2])
        assert cell in block and not _contradicts(v, table[at]), (name, v.arm, table[at:at + 2], cell)
        # The machines' summary: the same outcome and figures.
        assert by_arm[v.arm]["outcome"] == v.outcome and by_arm[v.arm]["cell"] == cell
        assert by_arm[v.arm]["ratio"] == (v.reading.ratio if v.reading else None)
        # The dashboard: the arm's badge is the verdict's.
        assert str(badge(v)) in page, (name, v.arm)
        # A declined arm is never given a speed, anywhere it is named with a figure.
        if v.outcome == V.DECLINED:
            assert not re.search(r"\d\.\d+x", " ".join(rows[v.arm])), rows[v.arm]
            assert by_arm[v.arm]["speed"] is None


@pytest.mark.parametrize("kind", [k for k, (_, want) in SYNTHETIC.items() if want])
def test_the_synthetic_cases_read_as_made(kind: str) -> None:
    """The cases above are what they say: otherwise the consistency test would pass vacuously."""
    make, want = SYNTHETIC[kind]
    v = judge(make()).of(ARM)
    assert v.outcome == want, (v.outcome, v.reading)
    assert v.reading is not None and v.reading.lo is not None


def test_the_real_record_has_declined_overridden_and_reference_arms() -> None:
    j = judge(_load(DEFAULT))
    outcomes = {v.arm: v.outcome for v in j.arms}
    assert outcomes["classic"] == V.REFERENCE
    assert V.DECLINED in outcomes.values()
    assert j.of(ARM).overrides and not j.of(ARM).shipping
    inc = judge(_incomplete())
    assert not inc.complete and inc.measured < j.measured
