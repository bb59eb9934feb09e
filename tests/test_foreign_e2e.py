"""A foreign engine, end to end: tinyspec (tests/foreign_engine.py) in its own git repository,
with its own CLI, override variables (TINY_*) and phases (draft, verify, host_readback), and the
harness pointed at it the way a lab would: a harness wheel built once, `harness init` in the
engine repository, the starter suite edited to declare the engine, then `harness run`,
`harness pr-check` (the slowed commit fails, the docs-only commit does not), and `harness
nightly` into a bare results repository: its `asv run` builds the new commit and installs the
harness wheel in asv's own environment (nothing is copied out of this repository), and its
change points alert the slowed commit.
Timings land in build/artifacts/foreign-e2e.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from asv_scratch import REPO, commit_all, git
from foreign_engine import make_foreign_repo

pytestmark = pytest.mark.e2e

MACHINE = "foreign"
ARTIFACTS = REPO / "build" / "artifacts"
# `{python} -m`: under pr-check each side is its commit's source tree on PYTHONPATH.
TINY = '["{python}", "-m", "tinyspec", "--prompt-file", "{prompt_file}", "--max-tokens", "{max_tokens}", "--block", "{block}", "--seed", "{seed}"]'

# What the lab writes into the starter suite: its engine's declaration and its arms.
SUITE = f"""
name = "tinyspec"
max_tokens = 256         # classic decodes ~16 ms at 64 tokens: one scheduler hiccup was a 70% outlier
temp = 0.0
seed = 0
repetitions = 7           # asv's Mann-Whitney test needs at least 7 a side
warmups = 1
cooldown_s = 0
budget_s = 45             # pr-check: seconds of measuring
max_repetitions = 200
threshold = 0.20
alpha = 0.05
looks = 3

[quiet]
enabled = false

[watch]
contended_share = 1.0     # these verdicts, not the contended rule (tests/test_contended.py)

[engines.tinyspec]
phases = ["draft", "verify", "host_readback"]
phase_labels = {{ verify = "verify forward (T={{block}})" }}
overrides = {{ TINY_ALLOW_INEXACT = "engages speculation although the batched-vs-single probe differs" }}
override_prefixes = ["TINY_"]
numerics = "NumPy (OpenBLAS)"

[[pairings]]
name = "random"
target = ".."             # tinyspec makes its weights from the seed: no model directory

[[arms]]
name = "classic"
engine = "tinyspec"
block = 1
command = {TINY}

[[arms]]
name = "block3"
engine = "tinyspec"
block = 3
command = {TINY}

[[arms]]
name = "block3-inexact"
engine = "tinyspec"
block = 3
command = {TINY}
env = {{ TINY_ALLOW_INEXACT = "1" }}

[[prompts]]
name = "code"
text = "def fibonacci(n):\\n    a, b = 0, 1\\n    for _ in range(n):"
"""
INEXACT = "block3-inexact [not shipping: TINY_ALLOW_INEXACT]"
TIMINGS: dict[str, float | dict] = {}


def _timing(name: str, t0: float) -> None:
    TIMINGS[name] = round(time.monotonic() - t0, 1)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "foreign-e2e.json").write_text(json.dumps(TIMINGS, indent=1, sort_keys=True) + "\n")


class Lab:
    def __init__(self, root: Path):
        self.root = root
        self.repo = root / "tinyspec"
        self.machine_file = root / "asv-machine.json"
        self.venv = root / "venv"
        self.python = self.venv / "bin" / "python"
        # The lab's shell: nothing of this checkout on the path, no engine variables inherited.
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PYTHONPATH", "VIRTUAL_ENV")
                    and not k.startswith(("SPECDEC_", "MLX_", "TINY_", "ASV_", "HARNESS_"))}
        self.env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{self.env.get('PATH', '')}"
        self.shas: dict[str, str] = {}

    def run(self, *argv: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), cwd=self.repo, env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def harness(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return self.run(str(self.venv / "bin" / "harness"), *args, timeout=timeout)

    def asv(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return self.run(str(self.python), "-m", "harness.ci.asvtool", "--machine-file", str(self.machine_file),
                        "--", *args, timeout=timeout)


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    """A fresh venv with the harness alone (a wheel of this repository, installed without its
    extras: no MLX), `harness init` in the engine's new repository, the engine's three commits."""
    lab = Lab(tmp_path_factory.mktemp("foreign-e2e"))
    t0 = time.monotonic()
    wheels = lab.root / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)],
                   check=True, capture_output=True, timeout=600)
    wheel = next(wheels.glob("*.whl"))
    subprocess.run([sys.executable, "-m", "venv", str(lab.venv)], check=True, timeout=120)
    subprocess.run([str(lab.python), "-m", "pip", "install", "-q", "--no-compile", str(wheel)], check=True,
                   timeout=900)
    _timing("fresh_venv_install_s", t0)
    freeze = subprocess.run([str(lab.python), "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    assert "mlx" not in freeze.lower(), freeze
    r = subprocess.run([str(lab.python), "-c", "import harness.cli, harness.collect.host.specs as h, sys; "
                        "print(sorted(h.load_specs())); assert 'mlx' not in sys.modules"],
                       capture_output=True, text=True, timeout=120, cwd=lab.root, env=lab.env)
    assert r.returncode == 0 and "h200" in r.stdout, r.stderr   # profiles shipped as package data

    def init(repo: Path) -> None:
        r = subprocess.run([str(lab.venv / "bin" / "harness"), "init", "--harness-spec", str(wheel),
                            "--hosts", "linux-cpu", "--command", "tinyspec --prompt-file {prompt_file}"],
                           cwd=repo, env=lab.env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        (repo / "benchmarks" / "suite.toml").write_text(SUITE)   # the lab declares its engine

    lab.shas = make_foreign_repo(lab.repo, prepare=init)
    r = lab.harness("host", "register", "--machine", MACHINE, "--machine-file", str(lab.machine_file))
    assert r.returncode == 0, r.stderr
    return lab


def test_harness_run_labels_and_reports_the_engines_own_phases_and_overrides(lab, tmp_path):
    # The engine installed in the lab's venv, as its developers have it (asv builds its own).
    subprocess.run([str(lab.python), "-m", "pip", "install", "-q", str(lab.repo)], check=True,
                   capture_output=True, timeout=300)
    record = tmp_path / "r.json"
    r = lab.harness("run", "benchmarks/suite.toml", "--quick", "--record", str(record))
    assert r.returncode == 0, r.stderr[-3000:]
    rec = json.loads(record.read_text())
    runs = [x for x in rec["runs"] if not x["warmup"]]
    assert runs and all(x["status"] == "ok" for x in runs), [x["error"] for x in runs]
    assert rec["suite"]["engines"]["tinyspec"]["phases"] == ["draft", "verify", "host_readback"]
    by = {a: [x for x in runs if x["arm"] == a] for a in ("classic", "block3", "block3-inexact")}
    assert all(x["overrides"] == {"TINY_ALLOW_INEXACT": "1"} and not x["shipping"] for x in by["block3-inexact"])
    assert all(x["overrides"] == {} for x in by["classic"] + by["block3"])
    assert all(x["shipping"] for x in by["classic"])
    for x in by["block3"]:
        # Labeled exactly as the engine's gate says: shipping when it passed, not when it declined.
        assert x["shipping"] == (x["gate"]["outcome"] == "passed"), x["gate"]
    assert all("host_readback" in x["diagnostics"]["phase_ms"] for x in by["block3-inexact"])
    assert rec["host"]["repo"]["commit"] == lab.shas["slow"]          # the engine's repository
    assert rec["host"]["harness"]["version"] != "unknown"              # the harness wheel's
    out = tmp_path / "r.md"
    r = lab.harness("report", str(record), "--out", str(out))
    assert r.returncode == 0, r.stderr
    md = out.read_text()
    assert "host_readback" in md and "verify forward (T=3)" in md
    assert "not a shipping configuration: override in force: TINY_ALLOW_INEXACT=1" in md
    assert "SPECDEC" not in md and "specdec" not in md


def _pr_check(lab: Lab, head: str, *extra: str) -> tuple[subprocess.CompletedProcess, str, dict]:
    out, js = lab.root / f"pr-{head}.md", lab.root / f"pr-{head}.json"
    t0 = time.monotonic()
    r = lab.harness("pr-check", lab.shas["base"], lab.shas[head], "--machine", MACHINE,
                    "--machine-file", str(lab.machine_file), "--output", str(out), "--json", str(js), *extra,
                    timeout=1500)
    _timing(f"pr_check_{head}_s", t0)
    return r, (out.read_text() if out.exists() else r.stdout), (json.loads(js.read_text()) if js.exists() else {})


def test_pr_check_fails_the_slowed_engine(lab):
    r, md, data = _pr_check(lab, "slow")
    assert r.returncode == 1, md + r.stderr[-3000:]
    classic = next(f for f in data["figures"] if f["gated"] and f["arm"] == "classic")
    assert classic["verdict"] == "worse" and classic["ratio"] > 1.2, classic
    assert any(x.startswith("| classic ms/token |") and x.endswith("| **slower** |") for x in md.splitlines()), md
    assert "block3-inexact: not a shipping configuration" in md


def test_pr_check_does_not_fail_a_docs_only_change(lab):
    # At the suite's 5% false-alarm level one docs-only check in twenty may fail by design; at
    # 0.2% a correct harness fails this test about once in 500 runs. A shorter budget than the
    # suite's: an inconclusive answer (3) is an accepted outcome here, a failure (1) is not.
    r, md, data = _pr_check(lab, "docs", "--alpha", "0.002", "--budget-s", "20")
    assert r.returncode in (0, 3), md + r.stderr[-3000:]
    assert "| **slower** |" not in md


def test_nightly_pushes_into_a_bare_results_repository(lab):
    # A commit lands after the checks above: nightly measures what has no results yet.
    readme = lab.repo / "README.md"
    readme.write_text(readme.read_text() + "\nNightly numbers: see the dashboard.\n")
    lab.shas["new"] = commit_all(lab.repo, "docs: point at the dashboard")
    bare = lab.root / "results.git"
    git(lab.root, "init", "-q", "--bare", "-b", "main", str(bare))
    t0 = time.monotonic()
    r = lab.harness("nightly", "--results-repo", str(bare), "--checkout", str(lab.root / "results-co"),
                    "--machine", MACHINE, "--machine-file", str(lab.machine_file), timeout=1500)
    _timing("nightly_s", t0)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    TIMINGS["nightly_stages"] = summary["stages_s"]
    # The change points ran over the four commits (base, docs, slow, new). Two commits either side
    # of a boundary give a t test two degrees of freedom: at the nightly's 1% false-discovery rate
    # whether the slowed commit's ~1.9x clears it depends on this host's load (tests/test_history_e2e.py
    # proves alerting on 32 commits). What must hold: nothing but the slowed commit is alerted, and
    # only as slower, except the round's cost in classic steps: the slowdown slows a classic step
    # (~2.1x) more than a round (~1.9x), so that ratio really falls, by 11% in one run and past the
    # 20% threshold in another.
    assert summary["history"]["commits"] == 4 and summary["history"]["series"] >= 10, summary["history"]
    titles = [a["title"] for a in summary["alerts"]]
    for a in summary["alerts"]:
        assert a["first_after"] == lab.shas["slow"], titles
        assert a["direction"] == "regression" or all("round_cost_classic_steps" in s for s in a["series"]), titles
    for a in summary["alerts"]:
        assert f"ALERT {a['title']}" in r.stdout
    # asv built the engine's commit in a virtualenv of its own, the harness wheel installed there
    # (nothing copied out of this repository), and its samples and the engine's own phases are
    # what it stored.
    assert "Benchmarking virtualenv" in r.stdout + r.stderr, r.stderr[-3000:]
    sys.path.insert(0, str(REPO))
    from harness.ci.asvtool import load_config, load_figures
    figs = load_figures(load_config(lab.repo / "asv.conf.json"), MACHINE, lab.shas["new"])
    classic = figs["bench_engine.Decode.track_ms_per_token('classic')"]
    assert classic.samples and len(classic.samples) >= 7 and classic.env.startswith("virtualenv"), classic
    phases = [k for k in figs if k.startswith(f"bench_engine.Phases.track_phase_ms_per_round('{INEXACT}'")]
    assert {p.rsplit("'", 2)[-2] for p in phases} == {"draft", "verify", "host_readback"}, sorted(figs)
    assert figs[f"bench_engine.Phases.track_phase_ms_per_round('{INEXACT}', 'host_readback')"].samples
    files = git(bare, "ls-tree", "-r", "--name-only", "main").splitlines()
    # Every measured commit's asv results (pr-check's stored ones too) and the new one's record.
    for k in ("base", "slow", "new"):
        assert any(f.startswith(f"results/{MACHINE}/{lab.shas[k][:8]}") for f in files), (k, files)
    assert any(f.startswith(f"records/{MACHINE}/{lab.shas['new'][:12]}") for f in files), files
    assert {f"alerts/{MACHINE}/state.json", f"alerts/{MACHINE}/feed.atom"} <= set(files)
    assert {f"alerts/{MACHINE}/{a['id']}.md" for a in summary["alerts"]} <= set(files)
