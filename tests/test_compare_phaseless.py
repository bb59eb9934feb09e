"""`harness report A --compare B` where the engine reports no phases: the comparison still
compares what both records have (ms/token and tok/s per arm and prompt), and its arms table
shows both records.

The pair is a real record (reports/, a 2-core CPU session of 6 arms, 2 prompts, 5 repetitions)
with every run's phase_ms removed, as an engine without phases writes it; B plants a +24% step
on ms/token, each run taking the next repetition's real value so the pairs keep real spread.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from harness_helpers import REPO, cli_in_process, md_section, write_record

from harness.render import mdtable

SOURCE = REPO / "reports" / "20261202-182230-cpu-blas-linux-cpu.json"
STEP = 1.24
REPS = 5


def _phaseless(quiet: bool = True) -> dict[str, Any]:
    """The source without phases; quiet: its contended marks taken off too (as on a quiet host),
    since past the suite's share of contended runs no verdict is clean."""
    rec = json.loads(SOURCE.read_text())
    for r in rec["runs"]:
        (r.get("diagnostics") or {}).pop("phase_ms", None)
        if quiet:
            r["marks"] = [m for m in (r.get("marks") or []) if m != "contended"]
    return rec


def _stepped(rec: dict[str, Any]) -> dict[str, Any]:
    """Every measured run STEP times slower, with the next repetition's real ms/token."""
    out = copy.deepcopy(rec)
    measured = {(r["arm"], r["prompt"], r["repetition"]): r for r in rec["runs"] if not r.get("warmup")}
    for r in out["runs"]:
        if r.get("warmup") or not isinstance(r.get("ms_per_token"), (int, float)):
            continue
        src = measured[(r["arm"], r["prompt"], (r["repetition"] + 1) % REPS)]
        r["ms_per_token"] = src["ms_per_token"] * STEP
        r["decode_tokens_per_s"] = 1000.0 / r["ms_per_token"]
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    t = tmp_path_factory.mktemp("phaseless")
    a = _phaseless()
    assert not any((r.get("diagnostics") or {}).get("phase_ms") for r in a["runs"])
    return t, write_record(t, "a.json", a), write_record(t, "b.json", _stepped(a))


def _report(cwd: Path, a: str, b: str, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> str:
    r = cli_in_process(["report", a, "--compare", b], cwd, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _table(md: str, head: list[str]) -> dict[str, list[str]]:
    t = next(t for t in mdtable.parse(md) if t[0][: len(head)] == head)
    return {f"{row[0]} {row[1]}" if head[1] == "prompt" else row[0]: row for row in t[1:]}


def test_a_planted_step_shows_in_every_arm(pair: tuple[Path, str, str], monkeypatch: pytest.MonkeyPatch,
                                           capsys: Any) -> None:
    t, a, b = pair
    ba = md_section(_report(t, a, b, monkeypatch, capsys), "Before and after")
    assert "each arm's change is its ms/token, in the tables below" in ba
    # The section leads with the finding: each arm's paired change. The rotated runs make each
    # prompt's ratios a full cycle, so their geometric mean is the step itself.
    first = ba.strip().split("\n\n")[0]
    assert first.startswith("After against before, ms/token per arm")
    assert re.search(r"\d slower \(classic \+24\.0% \(\+\d", first), first
    # The arms table: both records' tok/s, and the change judged paired.
    arms = _table(ba, ["arm", "before: tok/s", "after: tok/s"])
    assert list(arms) == ["classic", "block3", "block3-inexact", "block3-profile", "classic-refblas", "block3-refblas"]
    for arm, row in arms.items():
        assert arm in first
        before, after = float(row[1].split()[0]), float(row[2].split()[0])
        assert after == pytest.approx(before / STEP, rel=0.15), (arm, row)
        change = re.match(r"\+24\.0% \(([-+]\d+\.\d)% to \+(\d+\.\d)%\), (slower|inconclusive)", row[3])
        assert change, row[3]
        assert float(change[1]) <= 24.0 <= float(change[2])
    assert arms["classic"][3].endswith("slower")
    # Per arm and prompt: the runs' ms/token on both sides.
    rows = _table(ba, ["arm", "prompt", "before ms/token", "after ms/token"])
    assert len(rows) == 12 and all(re.search(r"(slower|inconclusive \(smallest detectable)", r[4]) for r in rows.values())


def test_the_headline_names_the_resolved_change(pair: tuple[Path, str, str], monkeypatch: pytest.MonkeyPatch,
                                                capsys: Any) -> None:
    t, a, b = pair
    head = _report(t, a, b, monkeypatch, capsys).split("\n## Setup")[0]
    assert re.search(r"the largest resolved change \(paired check, above the floor\) is \S+ \(\S+\) ms/token \+\d",
                     head), head


def test_across_hosts_both_hosts_are_in_the_arms_table(pair: tuple[Path, str, str],
                                                        monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    t, a, b = pair
    other = json.loads(Path(b).read_text())
    other["host"]["os"]["hostname"] = "another-host"
    md = _report(t, a, write_record(t, "b-host.json", other), monkeypatch, capsys)
    sec = md_section(md, "Cross-host comparison")
    assert sec.strip().startswith("Speed of B against A per arm")
    arms = _table(sec, ["arm", "A: tok/s", "B: tok/s"])
    assert len(arms) == 6
    for row in arms.values():
        assert re.fullmatch(r"0\.\d\dx", row[3]), row


def test_contended_runs_past_the_share_leave_the_comparison_inconclusive(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """The source as recorded: 22 of its 60 measured runs contended, over the suite's 25%, on
    both sides: a session would give no clean verdict on such runs, nor does a comparison."""
    a = _phaseless(quiet=False)
    pa, pb = write_record(tmp_path, "a.json", a), write_record(tmp_path, "b.json", _stepped(a))
    ba = md_section(_report(tmp_path, pa, pb, monkeypatch, capsys), "Before and after")
    arms = _table(ba, ["arm", "before: tok/s", "after: tok/s"])
    assert "slower" not in arms["classic"][-1], arms["classic"]
    assert re.search(r"inconclusive \(\d+ of \d+ runs contended\)", arms["classic"][-1]), arms["classic"]
