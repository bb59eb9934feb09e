"""An alert filed before its acknowledgement is marked acknowledged: a line under its heading in
the alert's Markdown (the rest of the file kept), its state entry, and its Atom feed entry's title
and summary, each file replaced whole (harness.collect.files).

The series is real data: the classic arm's per-run ms/token of a committed session (reports/,
an H200 host), one commit per resample of its runs, 1.5x from commit 12 on (found at commit 12
under every resampling seed from 0 to 39 at a 25% threshold); the commits are a real git
repository's, and the acknowledgement a real entry committed there by its author.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
import pytest
from asv_scratch import commit_all, git
from harness_helpers import REPO, asv_project, cli_in_process, one_line

from harness.analyze import acks as ackmod
from harness.analyze.changepoints import Point, analyze_series
from harness.ci.ackfile import load_acks
from harness.ci.history import Found, History, SeriesInfo, acknowledge_alerts, file_alerts

SOURCE = REPO / "reports" / "20261205-032041-mtp-study-h200.json"
STEP, THRESHOLD = 1.5, 0.25
MS = "bench_engine.Decode.track_ms_per_token"
SERIES = f"{MS}('classic')"
ATOM = "{http://www.w3.org/2005/Atom}"
REASON = "verify re-checks every draft: +50% on classic expected"
FILED = dt.datetime(2026, 12, 5, 3, 0, tzinfo=dt.timezone.utc)
LATER = dt.datetime(2026, 12, 7, 3, 0, tzinfo=dt.timezone.utc)


@pytest.fixture()
def lab(tmp_path: Path) -> dict:
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(20):
        (repo / "NOTES").write_text(f"commit {i}\n")
        shas.append(commit_all(repo, f"change {i}"))
    rec = json.loads(SOURCE.read_text())
    runs = [r["ms_per_token"] for r in rec["runs"] if r["arm"] == "classic" and not r["warmup"]
            and r["status"] == "ok"]
    rng = np.random.default_rng(7)
    points = [Point(c, tuple(float(x) * (STEP if i >= 12 else 1.0) for x in rng.choice(runs, 5)))
              for i, c in enumerate(shas)]
    return {"repo": repo, "shas": shas, "series": {SERIES: points}, "alerts": tmp_path / "alerts" / "lab"}


def _history(lab: dict, acks: list[ackmod.Ack]) -> History:
    """What harness.ci.history.detect makes of these series: steps, acknowledgements applied."""
    info = SeriesInfo(SERIES, MS, "classic", "ms_per_token", "ms")
    h = History("lab", len(lab["shas"]), 1)
    for r in analyze_series(lab["series"], lab["shas"], {SERIES: THRESHOLD}):
        for s in r.steps:
            names = ackmod.figure_names(info.figure, info.benchmark) + [r.series]
            h.found.append(Found(s, info, THRESHOLD, ackmod.find(acks, s.commits, names, info.arm)))
    return h


def _acknowledge(lab: dict) -> list[ackmod.Ack]:
    """The team's entry for the step's commit, committed by its author on 2026-12-06."""
    repo, path = lab["repo"], lab["repo"] / "benchmarks" / "acknowledgements.toml"
    path.parent.mkdir()
    path.write_text(f'[[acknowledge]]\ncommits = "{lab["shas"][12][:10]}"\nfigure = "ms/token"\n'
                    f'arm = "classic"\nreason = "{REASON}"\n')
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ada Lovelace", "GIT_AUTHOR_EMAIL": "ada@example.org",
           "GIT_AUTHOR_DATE": "2026-12-06T10:00:00+00:00", "GIT_COMMITTER_NAME": "Ada Lovelace",
           "GIT_COMMITTER_EMAIL": "ada@example.org"}
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "acknowledge the verify change"], cwd=repo, env=env, check=True)
    return load_acks(repo, path)


def test_an_alert_filed_before_its_acknowledgement_is_marked(lab: dict) -> None:
    alerts = lab["alerts"]
    (new,) = file_alerts(_history(lab, []), lab["shas"], alerts, now=FILED)
    assert lab["shas"][12][:8] in new["title"]
    md = Path(new["file"])
    before = md.read_text()
    (ack,) = _acknowledge(lab)
    # The next night: nothing new filed, the earlier alert marked.
    assert file_alerts(_history(lab, [ack]), lab["shas"], alerts, now=LATER) == []
    line = f"Acknowledged 2026-12-06 by Ada Lovelace: {REASON}"
    after = md.read_text()
    head = before.split("\n")[:2]
    assert after.split("\n")[:4] == head + ["", line]
    assert after.replace(f"\n{line}\n", "", 1) == before          # nothing else in the file moved
    assert (ack.by, ack.on) == ("Ada Lovelace", "2026-12-06")     # the entry's git author and date
    (entry,) = json.loads((alerts / "state.json").read_text())["alerts"]
    assert entry["acknowledged"]["line"] == line and entry["acknowledged"]["series"] == [SERIES]
    assert entry["title"] == new["title"] and entry["at"] == FILED.isoformat(timespec="seconds")
    (e,) = ET.parse(alerts / "feed.atom").getroot().findall(f"{ATOM}entry")
    assert e.find(f"{ATOM}title").text == "acknowledged: " + new["title"]
    assert e.find(f"{ATOM}summary").text == line
    assert e.find(f"{ATOM}updated").text == LATER.isoformat(timespec="seconds")
    assert line in e.find(f"{ATOM}content").text
    # Files replaced whole: no temp file left beside them. Another night changes nothing.
    assert sorted(p.name for p in alerts.iterdir()) == sorted(["state.json", "feed.atom", md.name])
    snapshot = {p.name: p.read_bytes() for p in alerts.iterdir()}
    assert file_alerts(_history(lab, [ack]), lab["shas"], alerts, now=LATER + dt.timedelta(days=1)) == []
    assert {p.name: p.read_bytes() for p in alerts.iterdir()} == snapshot


def test_an_edited_alert_keeps_its_edits_when_marked(lab: dict) -> None:
    # The alert file may be an issue body a person added to: the mark adds its line, keeps theirs.
    (new,) = file_alerts(_history(lab, []), lab["shas"], lab["alerts"], now=FILED)
    md = Path(new["file"])
    md.write_text(md.read_text() + "\nSeen on the lab host too. -- Grace\n")
    file_alerts(_history(lab, _acknowledge(lab)), lab["shas"], lab["alerts"], now=LATER)
    text = md.read_text()
    assert text.endswith("\nSeen on the lab host too. -- Grace\n") and "Acknowledged 2026-12-06 by Ada" in text


def test_acknowledging_without_a_night_marks_the_alert_and_files_nothing(lab: dict) -> None:
    # What `harness changes --alerts DIR` does: the mark now, rather than at the next nightly.
    (new,) = file_alerts(_history(lab, []), lab["shas"], lab["alerts"], now=FILED)
    h = _history(lab, _acknowledge(lab))
    assert acknowledge_alerts(h, lab["shas"], lab["alerts"], now=LATER) == [new["id"]]
    assert "Acknowledged 2026-12-06 by Ada Lovelace: " in Path(new["file"]).read_text()
    assert acknowledge_alerts(h, lab["shas"], lab["alerts"], now=LATER) == []
    assert sorted(p.name for p in lab["alerts"].iterdir()) == sorted(["state.json", "feed.atom", f"{new['id']}.md"])


def test_changes_alerts_needs_a_directory_the_nightly_filed_into(tmp_path: Path, monkeypatch, capsys) -> None:
    proj = asv_project(tmp_path)
    r = cli_in_process(["changes", "--alerts", str(tmp_path / "nowhere")], proj, monkeypatch, capsys)
    assert "no state.json, so no alerts filed there" in one_line(r)
