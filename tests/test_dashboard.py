"""The harness's dashboard pages, published by `harness dashboard publish` from real records and
an alerts directory written by the nightly's own code, then opened in headless Chromium.

The records are committed ones (reports/*.json): three sessions of linux-cpu at three commits of
this repository (its block3 arm declined: the engine's gate chose classic decode) and three of
h200 at one commit. The nightly's change points are found by harness.analyze.changepoints over those
records' ms/token and filed by harness.ci.history (state, Markdown, feed); one is acknowledged
before the night (never alerted), one after its alert was filed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness_helpers import REPO, chromium_argv, console_errors, git, probe_page

from harness.analyze.changepoints import Point, analyze_series
from harness.ci.ackfile import load_acks
from harness.ci.history import Found, History, file_alerts, series_info
from harness.ci.site import write_changes

BENCH = "bench_specdec.Decode.track_ms_per_token"
CPU = ["20261202-182230-cpu-blas-linux-cpu", "20261202-185455-cross-host-linux-cpu",
       "20261205-084154-mtp-study-linux-cpu"]
H200 = ["20261205-021945-random-8b-spec-cudnn-on-h200", "20261205-022112-random-8b-spec-h200",
        "20261205-032041-mtp-study-h200"]
ACK_BEFORE = "measured by another suite (cross-host) from this commit on"
ACK_AFTER = "measured by another suite (mtp-study) from this commit on"


def _commit(name: str) -> str:
    return json.loads((REPO / "reports" / f"{name}.json").read_text())["host"]["repo"]["commit"]


def _ms(name: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in json.loads((REPO / "reports" / f"{name}.json").read_text())["runs"]:
        if not r.get("warmup") and r.get("status") == "ok":
            out.setdefault(r["arm"], []).append(float(r["ms_per_token"]))
    return out


def _acks_file(proj: Path, entries: list[tuple[str, str, str]]) -> Path:
    p = proj / "benchmarks" / "acknowledgements.toml"
    p.write_text("".join(f'[[acknowledge]]\ncommits = "{c}"\nfigure = "ms/token"\narm = "{a}"\nreason = "{r}"\n\n'
                         for c, a, r in entries))
    return p


def _night(proj: Path, alerts: Path) -> None:
    """The nightly's change stage over the linux-cpu records: every ms/token step (exact mode:
    each differing commit median), acknowledgements applied, alerts filed."""
    order = [_commit(n) for n in CPU]
    series: dict[str, list[Point]] = {}
    for n, c in zip(CPU, order):
        for arm, xs in _ms(n).items():
            series.setdefault(f"{BENCH}('{arm}')", []).append(Point(c, tuple(xs)))
    acks = load_acks(proj, _acks_file(proj, [(order[1], "block3-inexact", ACK_BEFORE)]))
    h = History("linux-cpu", len(order), len(series))
    from harness.analyze.acks import find
    for res in analyze_series(series, order, 0.10, exact=set(series)):
        for s in res.steps:
            info = series_info(s.series, BENCH, (s.series.split("'")[1],), "ms/token")
            h.found.append(Found(s, info, 0.10, find(acks, s.commits, ["ms/token"], info.arm)))
    assert any(f.ack for f in h.found) and any(not f.ack for f in h.found)
    file_alerts(h, order, alerts / "linux-cpu")
    write_changes(alerts / "linux-cpu", h.to_dict())
    # After the night: an acknowledgement of a change already alerted.
    _acks_file(proj, [(order[1], "block3-inexact", ACK_BEFORE), (order[2], "classic", ACK_AFTER)])


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict[str, Path]:
    t = tmp_path_factory.mktemp("dashboard")
    proj = t / "proj"
    # This repository's commits (the records'), objects shared: acknowledgements resolve here.
    git(t, "clone", "-q", "--shared", "--no-checkout", str(REPO), str(proj))
    (proj / "benchmarks").mkdir()
    (proj / "asv.conf.json").write_text(json.dumps({"version": 1, "project": "specdec", "repo": ".",
                                                    "branches": ["HEAD"], "benchmark_dir": "benchmarks"}))
    (proj / "results").mkdir()
    (proj / "results" / "benchmarks.json").write_text('{"version": 2}')
    records = t / "records"
    for host, names in (("linux-cpu", CPU), ("h200", H200)):
        (records / host).mkdir(parents=True)
        for n in names:
            for ext in (".json", ".md"):
                if (REPO / "reports" / f"{n}{ext}").exists():
                    shutil.copyfile(REPO / "reports" / f"{n}{ext}", records / host / f"{n}{ext}")
    alerts = t / "alerts"
    _night(proj, alerts)
    r = subprocess.run([sys.executable, "-m", "harness", "dashboard", "publish", "--no-vendor",
                        "--records", str(records), "--alerts", str(alerts)],
                       cwd=proj, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return {"html": proj / "html", "alerts": alerts, "tmp": t}


def test_publish_links_the_harness_pages_from_asvs_index(site):
    html = site["html"]
    asv = (html / "index.html").read_text()
    assert 'id="harness-dashboard-link" href="harness/index.html"' in asv
    assert (html / "harness" / "hosts" / "linux-cpu.html").is_file()


def test_every_local_link_and_image_resolves(site):
    root = site["html"] / "harness"
    pages = sorted(root.rglob("*.html"))
    assert len(pages) >= 2 + 4 + 1, pages      # index, 2 hosts, 4 records, alerts
    for page in pages:
        for ref in re.findall(r'(?:href|src)="([^"]+)"', page.read_text()):
            if ref.startswith(("#", "http:", "https:", "mailto:")):
                continue
            target = (page.parent / ref.split("#")[0]).resolve()
            assert target.exists(), f"{page.relative_to(root)} links {ref}, which is not there"


def test_acknowledged_changes_are_marked_so(site):
    host = (site["html"] / "harness" / "hosts" / "linux-cpu.html").read_text()
    rows = re.findall(r'<tr class="change-row([^"]*)">(.*?)</tr>', host, re.S)
    acked = [body for cls, body in rows if "acknowledged" in cls]
    # One never alerted (acknowledged before the night), one alerted and acknowledged after.
    assert any(ACK_BEFORE in b and "alert</a>" not in b for b in acked), acked
    assert any(ACK_AFTER in b and "alert</a>" in b for b in acked), acked
    assert any("acknowledged" not in cls and "alerted" in body for cls, body in rows), rows
    # The alert filed before its acknowledgement says so on its own page too.
    href = next(re.search(r'href="([^"]+)">alert</a>', b).group(1) for b in acked if ACK_AFTER in b)
    page = (site["html"] / "harness" / "hosts" / href).resolve().read_text()
    assert "acknowledged</span> " + ACK_AFTER in page and "<table>" in page


# --- in a real headless Chromium -------------------------------------------------------------

def test_chromium_shows_verdicts_labels_and_declined_arms(site):
    index = site["html"] / "harness" / "index.html"
    dom, stderr = probe_page(index, site["tmp"] / "profile-index")
    assert dom["errors"] == [] and dom["broken"] == [] and not console_errors(stderr), (dom, stderr[-2000:])
    text = dom["text"]
    for words in ("not shipping", "declined", "do not publish", "contended", "shipping"):
        assert words in text, words
    # Badges are verdictwords.code: the references, the judged arms and the declined one.
    assert {"reference", "slower", "declined", "profiled"} <= set(dom["badges"]), dom["badges"]
    assert dom["declined_rows"] == 1 and dom["declined_points"] >= 2, dom
    assert dom["svgs"] >= 10

    host = site["html"] / "harness" / "hosts" / "linux-cpu.html"
    dom, stderr = probe_page(host, site["tmp"] / "profile-host")
    assert dom["errors"] == [] and dom["broken"] == [] and not console_errors(stderr), (dom, stderr[-2000:])
    assert "block3 declined: its gate chose classic decode" in dom["text"]
    assert "acknowledged" in dom["text"] and ACK_AFTER in dom["text"]


def test_chromium_renders_a_record_page_with_its_report(site):
    page = next((site["html"] / "harness" / "records" / "linux-cpu").glob("*cross-host*.html"))
    dom, stderr = probe_page(page, site["tmp"] / "profile-record")
    assert dom["errors"] == [] and dom["broken"] == [] and not console_errors(stderr), (dom, stderr[-2000:])
    # The committed report's own heading and a table, as HTML.
    md = (REPO / "reports" / "20261202-185455-cross-host-linux-cpu.md").read_text()
    heading = next(ln.lstrip("# ").strip() for ln in md.splitlines() if ln.startswith("#"))
    assert heading.split("`")[0][:30] in dom["text"]


def _png_colours(path: Path) -> int:
    """Distinct colours in the screenshot (Pillow, which matplotlib brings)."""
    from PIL import Image

    with Image.open(path) as im:
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    return len(colours or [])


def test_screenshot_of_the_index_is_not_blank(site):
    shot = site["tmp"] / "dashboard.png"
    subprocess.run(chromium_argv(site["tmp"] / "profile-shot") + [f"--screenshot={shot}",
                   (site["html"] / "harness" / "index.html").as_uri()], capture_output=True, timeout=60)
    assert shot.exists() and shot.stat().st_size > 10_000
    assert _png_colours(shot) > 20
    # Kept for a person to look at (docs/img/dashboard.png is this picture).
    (REPO / "build" / "artifacts").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, REPO / "build" / "artifacts" / "harness-dashboard.png")


def test_publish_names_a_missing_records_directory_in_one_line(site):
    proj = site["html"].parent
    r = subprocess.run([sys.executable, "-m", "harness", "dashboard", "publish", "--no-vendor",
                        "--records", str(site["tmp"] / "no-such-dir")], cwd=proj, capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--records" in r.stderr and "no such directory" in r.stderr


def test_a_site_without_records_says_so(tmp_path):
    from harness.ci.site import Sources, build_site

    index = build_site(tmp_path / "html", Sources(records=tmp_path / "none", alerts=None))
    text = index.read_text()
    assert 'id="no-data"' in text and "No harness record found" in text


def test_an_alert_the_nightly_marked_acknowledged_reads_so_without_the_file():
    from harness.analyze.series import changes_of

    s = f"{BENCH}('classic')"
    state = {"alerts": [{"id": "a1", "series": [s], "direction": "regression", "last_before": "b" * 40,
                         "first_after": "c" * 40, "title": "regression: classic", "at": "2026-12-06T00:00:00+00:00",
                         "acknowledged": {"reason": "meant", "by": "Ada"}},
                        {"id": "a2", "series": [s], "direction": "improvement", "last_before": "c" * 40,
                         "first_after": "d" * 40, "title": "improvement: classic", "at": "2026-12-07T00:00:00+00:00"}]}
    got = {c.alert_id: c for c in changes_of(state, [], [], {}, {})}
    assert got["a1"].acknowledged == "meant" and got["a2"].acknowledged is None
    assert got["a1"].arm == "classic" and got["a1"].figure_name == "ms/token"
