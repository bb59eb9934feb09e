"""End-to-end proof of the asv integration, on a scratch copy of this project (asv_scratch.py).

`asv run` with per-commit virtualenv installs measures two commits (base, slow); the step at
`slow` must show; `harness nightly` must measure a branch with a commit that does not build and
one whose engine crashes (failed there, the run goes on), publish the dashboard and push the
results to a results repository; headless Chromium must show a graph with points for more
than one commit. Timings land in build/artifacts/asv-e2e.json, the screenshot in
build/artifacts/dashboard.png. `harness pr-check` over the same kind of scratch project is
tests/test_pr_check_e2e.py (a file of its own, so make test runs the two side by side).

Select it alone with `python -m pytest -m e2e`; `make test` runs it too (about 4 minutes here).
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import subprocess
import threading
import time
from pathlib import Path

import harness_helpers
import pytest
from asv_scratch import ARTIFACTS, MACHINE, Scratch, commit_all, git, new_scratch, record_timing

pytestmark = pytest.mark.e2e

WORK = 2.0                # target decode forwards added to each (classic about 2.5x slower here)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Scratch:
    s = new_scratch(tmp_path_factory.mktemp("asv-e2e"), WORK)
    # base and slow: the step (comment, a comment-only change, is pr-check's to judge).
    hashes = s.root / "asv-run.hashes"
    hashes.write_text(f"{s.shas['slow']}\n{s.shas['base']}\n")
    t0 = time.monotonic()
    r = s.asv("run", f"HASHFILE:{hashes}", "--record-samples", "--machine", MACHINE, "--show-stderr",
              timeout=1500)
    record_timing("asv_run_2_commits_s", time.monotonic() - t0)
    assert "Benchmarking virtualenv" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    return s


def _median_ms(s: Scratch, sha: str, arm: str = "classic") -> float:
    f = s.figures(sha)[f"bench_specdec.Decode.track_ms_per_token('{arm}')"]
    assert f.samples and len(f.samples) >= 7, f"too few samples for a Mann-Whitney verdict: {f.samples}"
    return float(f.value)


def test_asv_run_measures_each_commit_and_shows_the_step(scratch):
    base, slow = (_median_ms(scratch, scratch.shas[k]) for k in ("base", "slow"))
    # The slowdown is WORK forwards per token on classic decode. asv measures the commits one after
    # another, and sessions on this host drift by up to a third; a 2.5x step stays unmistakable.
    assert slow / base > 1.3, (base, slow)
    assert not scratch.figures(scratch.shas["comment"]), "asv run measured a commit it was not given"
    figs = scratch.figures(scratch.shas["base"])
    inexact = "block3-inexact [not shipping: SPECDEC_ALLOW_INEXACT]"
    assert figs[f"bench_specdec.Rounds.track_rejection_rate('{inexact}')"].value is not None
    assert figs[f"bench_specdec.Phases.track_phase_ms_per_round('{inexact}', 'verify_forward')"].samples
    # Classic decode has no rounds: skipped (n/a), not failed.
    # block3 declines to classic where the probe fails (no rounds: skipped, n/a) and engages
    # where it passes (a value): exactly one of the two, never a failure.
    b3 = figs["bench_specdec.Rounds.track_ms_per_round('block3')"]
    assert not b3.failed, b3        # skipped is a NaN value, measured a number; failed is None


@pytest.fixture(scope="module")
def nightly_run(scratch):
    """A branch off `comment`: a commit that does not build, one whose engine crashes, a fix."""
    p = scratch.proj
    git(p, "checkout", "-q", "-b", "broken")
    pyproject = p / "pyproject.toml"
    good = pyproject.read_text()
    pyproject.write_text(good.replace('version = "0.1.0"', 'version = "not a version"'))
    no_build = commit_all(p, "broken: pyproject.toml with an invalid version (the wheel cannot be built)")
    pyproject.write_text(good)
    engine = p / "specdec" / "engine.py"
    ok_engine = engine.read_text()
    engine.write_text(ok_engine + "\ndef broken(:\n")
    crash = commit_all(p, "broken: a syntax error in the engine (every run crashes)")
    engine.write_text(ok_engine)
    fixed = commit_all(p, "fixed")
    git(p, "checkout", "-q", "main")
    bare = scratch.root / "results.git"
    git(scratch.root, "init", "-q", "--bare", "-b", "main", str(bare))
    t0 = time.monotonic()
    r = scratch.harness("nightly", "--results-repo", str(bare), "--checkout", str(scratch.root / "results-co"),
                        "--branch", "broken", "--since", no_build, "--machine", MACHINE,
                        "--machine-file", str(scratch.machine_file), timeout=1500)
    record_timing("nightly_3_commits_s", time.monotonic() - t0)
    return {"r": r, "bare": bare, "no_build": no_build, "crash": crash, "fixed": fixed}


def test_nightly_marks_broken_commits_failed_goes_on_and_pushes(scratch, nightly_run):
    r, bare = nightly_run["r"], nightly_run["bare"]
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["pushed"] is True
    assert set(summary["stages_s"]) == {"sync", "baselines", "asv run", "publish", "reports", "changes", "push"}, summary
    # Three commits of which two failed: one measured point per series, so nothing to call a step.
    assert summary["alerts"] == [] and summary["history"]["steps"] == 0, summary["history"]
    record_timing("nightly_stages", summary["stages_s"])
    assert set(summary["measured"]) == {nightly_run[k] for k in ("no_build", "crash", "fixed")}
    assert set(summary["failed"]) == {nightly_run["no_build"], nightly_run["crash"]}
    for k in ("no_build", "crash"):
        figs = scratch.figures(nightly_run[k])
        assert figs and all(f.failed for f in figs.values() if not f.skipped), k
    assert _median_ms(scratch, nightly_run["fixed"]) > 0
    # The results repository got this host's directories.
    files = git(bare, "ls-tree", "-r", "--name-only", "main").splitlines()
    assert any(f.startswith(f"results/{MACHINE}/{nightly_run['fixed'][:8]}") for f in files), files
    assert f"results/{MACHINE}/machine.json" in files
    assert any(f.startswith(f"records/{MACHINE}/") and f.endswith(".json") for f in files)
    assert (scratch.proj / "html" / "index.html").exists()
    # The harness's pages beside asv's, linked from its navigation bar: this night's records.
    html = scratch.proj / "html"
    assert 'id="harness-dashboard-link" href="harness/index.html"' in (html / "index.html").read_text()
    host = (html / "harness" / "hosts" / f"{MACHINE}.html").read_text()
    assert 'data-arm="classic"' in host and nightly_run["fixed"][:8] in host
    assert any(f.startswith(f"alerts/{MACHINE}/changes.json") for f in files), files


def test_nightly_with_an_unreachable_results_repo_is_one_line(scratch, tmp_path):
    r = scratch.harness("nightly", "--results-repo", str(tmp_path / "no-such-repo.git"),
                        "--checkout", str(tmp_path / "co"), "--machine", MACHINE,
                        "--machine-file", str(scratch.machine_file), timeout=300)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness: results repository") and "unreachable" in lines[0], r.stderr


# --- the dashboard, as a person sees it ----------------------------------------------------

PROBE = """<script>
(function poll() {
  var el = document.getElementById('harness-probe');
  if (!el) { el = document.createElement('pre'); el.id = 'harness-probe'; document.body.appendChild(el); }
  try {
    var plot = window.$ && $('#main-graph').data('plot');
    if (plot) {
      var series = plot.getData(), xs = {}, n = 0;
      series.forEach(function (s) { s.data.forEach(function (d) {
        if (d && d[1] !== null && !isNaN(d[1])) { n++; xs[d[0]] = 1; } }); });
      if (n > 0) {
        el.textContent = 'PROBE' + JSON.stringify({series: series.length, points: n,
          commits: Object.keys(xs).length, labels: series.map(function (s) { return s.label; })}) + 'PROBE';
        return;
      }
    }
  } catch (e) { el.textContent = 'PROBE' + JSON.stringify({error: String(e)}) + 'PROBE'; }
  setTimeout(poll, 200);
})();
</script>"""


class _ProbeHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the published dashboard as is, adding the probe script to index.html only."""

    def do_GET(self):  # noqa: N802
        if self.path.split("?")[0].split("#")[0] in ("/", "/index.html"):
            body = (Path(self.directory) / "index.html").read_text().replace("</body>", PROBE + "</body>")
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        super().do_GET()

    def log_message(self, *args):
        pass


def _chromium() -> str:
    # `make test` installs one (`make chromium`); the dashboard is part of what CI proves. On
    # macOS, Google Chrome where it installs, else the test is skipped and says why.
    return harness_helpers.chromium()


def _chromium_argv(exe: str, profile: Path) -> list[str]:
    return [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--virtual-time-budget=20000",
            "--window-size=1400,900"]


def test_dashboard_graph_shows_points_for_several_commits(scratch, nightly_run, tmp_path):
    exe = _chromium()
    html = scratch.proj / "html"
    assert (html / "index.html").exists()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_ProbeHandler, directory=str(html)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/#bench_specdec.Decode.track_ms_per_token"
    try:
        r = subprocess.run(_chromium_argv(exe, tmp_path / "profile-dom") + ["--dump-dom", url],
                           capture_output=True, text=True, timeout=180)
        m = re.search(r'<pre id="harness-probe">PROBE(.*?)PROBE</pre>', r.stdout.replace("&quot;", '"'))
        assert m, f"the graph did not render: {r.stdout[-1500:]} {r.stderr[-1500:]}"
        probe = json.loads(m.group(1))
        assert "error" not in probe, probe
        assert probe["commits"] > 1 and probe["points"] > probe["series"], probe
        assert any("classic" in lab for lab in probe["labels"]), probe
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "dashboard.png"
        shot.unlink(missing_ok=True)
        subprocess.run(_chromium_argv(exe, tmp_path / "profile-shot") + [f"--screenshot={shot}", url],
                       capture_output=True, text=True, timeout=180)
        assert shot.exists() and shot.stat().st_size > 10_000
        # The harness's index, as the same browser shows it: a verdict badge per arm.
        r = subprocess.run(_chromium_argv(exe, tmp_path / "profile-harness") + [
            "--dump-dom", f"http://127.0.0.1:{server.server_address[1]}/harness/index.html"],
            capture_output=True, text=True, timeout=180)
        assert 'class="badge v-reference"' in r.stdout and "block3" in r.stdout, r.stdout[-1500:]
        (ARTIFACTS / "dashboard-probe.json").write_text(json.dumps(probe, indent=1) + "\n")
    finally:
        server.shutdown()
