"""A compiled engine, end to end: rustspec (tests/fixtures/rustspec, a Rust CLI with no
dependencies) in its own git repository with three commits (base, a docs-only change, a
verify loop with four passes over each position instead of two: about 90% more decode time) and a suite whose engine declares `build` and whose arm runs
`{tree}/target/release/rustspec`. `harness pr-check` builds each commit once in its own tree
(the base commit's build is reused by the second check), fails the slowdown (its outputs
byte-identical: the verdict is the time's) and does not fail
the docs-only change; pointed at one prebuilt binary outside the trees, with no build, the
check is refused with one line instead of comparing a program with itself.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from asv_scratch import commit_all, git
from harness_helpers import cli_in_process

pytestmark = pytest.mark.e2e

FIXTURE = Path(__file__).parent / "fixtures" / "rustspec"
BUILD = '["cargo", "build", "--release", "--offline", "--quiet"]'
ARGS = '"--prompt-file", "{prompt_file}", "--max-tokens", "{max_tokens}", "--block", "{block}"'
SUITE = """
name = "rustspec"
max_tokens = 12
temp = 0.0
seed = 0
repetitions = 8
warmups = 1
cooldown_s = 0
threshold = 0.10
budget_s = 25             # a busy 2-core host: rounds are added while a figure is unresolved
max_repetitions = 60
looks = 3

[quiet]
enabled = false

[watch]
contended_share = 1.0     # the build's verdicts, not the contended rule (tests/test_contended.py)

[engines.rustspec]
phases = ["draft", "verify"]
{build}

[[pairings]]
name = "none"
target = ".."

[[arms]]
name = "block3"
engine = "rustspec"
block = 3
command = [{program}, {args}]

[[prompts]]
name = "hello"
text = "fn main() {{ println!(\\"hello\\"); }}"
"""


@pytest.fixture(scope="module")
def engine_repo(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed: the compiled-engine test needs it")
    root = tmp_path_factory.mktemp("rust-e2e")
    repo = root / "rustspec"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("target"))
    (repo / "README.md").write_text("# rustspec\n")
    (repo / ".gitignore").write_text("target/\n.harness/\n.asv/\n")
    (repo / "benchmarks").mkdir()
    (repo / "benchmarks" / "suite.toml").write_text(
        SUITE.format(build=f"build = {BUILD}", program='"{tree}/target/release/rustspec"', args=ARGS))
    (repo / "asv.conf.json").write_text(json.dumps({"version": 1, "project": "rustspec", "repo": ".",
                                                    "benchmark_dir": "benchmarks",
                                                    "harness_suite": "benchmarks/suite.toml"}))
    git(repo, "init", "-q", "-b", "main")
    shas = {"base": commit_all(repo, "rustspec")}
    (repo / "README.md").write_text("# rustspec\n\nA tiny engine for the harness's tests.\n")
    shas["docs"] = commit_all(repo, "docs: say what rustspec is")
    main_rs = repo / "src" / "main.rs"
    text = main_rs.read_text()
    assert "const VERIFY_PASSES: u32 = 2;" in text
    main_rs.write_text(text.replace("const VERIFY_PASSES: u32 = 2;", "const VERIFY_PASSES: u32 = 4;"))
    shas["slow"] = commit_all(repo, "verify: four passes over each position (twice the verify work)")
    return repo, shas


@pytest.fixture
def cargo_home(tmp_path, monkeypatch):
    # Nothing of the build is written to the user's home.
    monkeypatch.setenv("CARGO_HOME", str(tmp_path / "cargo-home"))
    monkeypatch.delenv("CARGO_TARGET_DIR", raising=False)


def _pr_check(repo: Path, shas: dict[str, str], head: str, monkeypatch, capsys, *extra: str):
    out = repo.parent / f"pr-{head}-{len(list(repo.parent.glob('pr-*.json')))}.json"
    r = cli_in_process(["pr-check", shas["base"], shas[head], "--no-asv", "--json", str(out),
                        "--output", str(out.with_suffix(".md")), *extra], repo, monkeypatch, capsys)
    return r, (json.loads(out.read_text()) if out.exists() else {})


def test_pr_check_builds_each_commit_and_fails_the_slower_verify(engine_repo, cargo_home, monkeypatch, capsys):
    repo, shas = engine_repo
    r, data = _pr_check(repo, shas, "slow", monkeypatch, capsys)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    fig = next(f for f in data["figures"] if f["gated"] and f["figure"] == "ms/token")
    assert fig["verdict"] == "worse" and fig["ratio"] > 1.2, fig
    assert data["headline"].startswith("FAIL: block3 ms/token +") and "identical" not in data["headline"]
    verify = next(f for f in data["figures"] if f["figure"] == "phase ms/round: verify")
    assert verify["verdict"] == "worse", verify
    builds = data["builds"]
    assert {b["commit"] for b in builds.values()} == {shas["base"], shas["slow"]}
    assert all(Path(b["tree"], "target", "release", "rustspec").is_file() for b in builds.values())
    assert "built in" in r.stderr and shas["slow"][:12] in r.stderr
    # The record of each side says how its commit was built.
    rec = json.loads(Path(data["records"]["head"]).read_text())
    assert rec["build"]["commit"] == shas["slow"] and rec["build"]["argv"] == [json.loads(BUILD)]


def test_pr_check_does_not_fail_a_docs_only_commit_and_reuses_the_base_build(engine_repo, cargo_home,
                                                                                monkeypatch, capsys):
    repo, shas = engine_repo
    # 0.2% false-alarm level: a correct harness fails this about once in 500 runs.
    r, data = _pr_check(repo, shas, "docs", monkeypatch, capsys, "--alpha", "0.002")
    assert r.returncode in (0, 3), r.stdout[-3000:] + r.stderr[-3000:]
    assert data["builds"]["head"]["commit"] == shas["docs"]
    # The base commit was built by the first check (module order) or now; never twice.
    trees = [p for p in (repo / ".harness" / "builds").glob(f"{shas['base'][:12]}-*") if p.is_dir()]
    assert len(trees) == 1
    # The PR comment says how each side was built.
    md = next(repo.parent.glob("pr-docs-*.md")).read_text()
    assert f"- head {shas['docs'][:12]}: built in " in md and f"- base {shas['base'][:12]}: " in md


def test_pr_check_refuses_one_prebuilt_binary_outside_the_trees(engine_repo, cargo_home, tmp_path,
                                                                 monkeypatch, capsys):
    import subprocess

    repo, shas = engine_repo
    prebuilt = tmp_path / "prebuilt"
    shutil.copytree(FIXTURE, prebuilt, ignore=shutil.ignore_patterns("target"))
    subprocess.run(json.loads(BUILD), cwd=prebuilt, check=True, capture_output=True, timeout=300)
    binary = prebuilt / "target" / "release" / "rustspec"
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE.format(build="", program=json.dumps(str(binary)), args=ARGS))
    r, data = _pr_check(repo, shas, "slow", monkeypatch, capsys, "--suite", str(suite))
    assert r.returncode == 2 and not data, r.stdout[-2000:] + r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("harness: arm 'block3' runs ") and "for both commits" in lines[-1], lines
    assert "build = [...]" in lines[-1] and "Traceback" not in r.stderr
