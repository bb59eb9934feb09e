"""A scratch copy of this project with a few commits, for the asv end-to-end test and the
PR-check sensitivity measurement (scripts/studies/asv_sensitivity.py).

The copy is of the working tree's tracked files (so uncommitted edits are what gets tested),
in a fresh git repository:

    base     the project as it is
    slow     the engine adds `work` of a target decode forward's device work to every target
             decode forward, set in code as the default of SPECDEC_INJECT_WORK (no env var: the
             run stays a shipping one; no output byte changes)
    comment  the slowdown reverted and a comment added: differs from `base` only in a comment
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENGINE = Path("specdec/overrides.py")
WORK_CALL = 'number("SPECDEC_INJECT_WORK")'


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "e2e", "GIT_AUTHOR_EMAIL": "e2e@localhost",
           "GIT_COMMITTER_NAME": "e2e", "GIT_COMMITTER_EMAIL": "e2e@localhost"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


SKIP_DIRS = {".git", ".device", ".venv", "build", ".asv", "results", "html", "records", "baselines",
             "__pycache__", ".pytest_cache", ".harness"}


def copy_tracked(dst: Path) -> None:
    if not (REPO / ".git").exists():   # a copy of the tree without its history (the GPU machine)
        shutil.copytree(REPO, dst, dirs_exist_ok=True,
                        ignore=lambda d, names: [n for n in names if n in SKIP_DIRS or n.endswith(".egg-info")])
        return
    # Tracked files and untracked ones git does not ignore: what a commit of this tree would hold.
    files = git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for f in files:
        if not f:
            continue
        src = REPO / f
        if src.is_file():
            t = dst / f
            t.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, t)


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def slow_engine(repo: Path, work: float) -> None:
    """The engine at `repo` slowed by `work` (a fraction >= 0) of a target decode forward per forward."""
    p = repo / ENGINE
    text = p.read_text()
    assert WORK_CALL in text, f"{ENGINE} no longer reads {WORK_CALL}; update tests/asv_scratch.py"
    p.write_text(text.replace(WORK_CALL, f'number("SPECDEC_INJECT_WORK", {float(work)!r})', 1))


def make_scratch(root: Path, work: float = 1.0) -> dict[str, str]:
    """The scratch repository at root/project with commits base, slow, comment (see above)."""
    proj = root / "project"
    proj.mkdir(parents=True)
    copy_tracked(proj)
    git(proj, "init", "-q", "-b", "main")
    shas = {"base": commit_all(proj, "base: the project as it is")}
    original = (proj / ENGINE).read_text()
    slow_engine(proj, work)
    shas["slow"] = commit_all(proj, f"slow: the engine adds {work:g} of a target decode forward's work to each")
    (proj / ENGINE).write_text(original + "# A comment-only change: no code differs from base.\n")
    shas["comment"] = commit_all(proj, "comment: slowdown reverted, a comment added")
    return shas


def fast_suite(path: Path, repetitions: int = 7) -> Path:
    """benchmarks/suite.toml with the waiting taken out (cooldown 0.2 s, no quiet wait), 24 tokens a run, and a
    fixed number of runs (no time budget; 7, the fewest with which asv's Mann-Whitney test can
    call a change significant): the protocol is the same, the session takes seconds (so one
    worker generation: no restart_s). The contention watch still records load, and no share of
    contended runs holds a verdict back."""
    text = (REPO / "benchmarks" / "suite.toml").read_text()
    out = []
    in_quiet = False
    for line in text.splitlines():
        if line.startswith("["):
            in_quiet = line.startswith("[quiet]")
        if line.startswith(("budget_s", "max_repetitions", "cooldown_ratio", "cooldown_cap_s", "restart_s")):
            continue
        if line.startswith("cooldown_s"):
            line = "cooldown_s = 0.2"
        elif line.startswith("repetitions"):
            line = f"repetitions = {repetitions}"
        elif line.startswith("max_tokens"):
            line = "max_tokens = 24"       # half the suite's: the same protocol, half the decoding
        elif in_quiet and line.startswith("enabled"):
            line = "enabled = false"
        out.append(line)
        if line.startswith("[watch]"):
            # Under make test's other workers every run here reads contended: these tests judge
            # the verdicts, not the contended rule (tests/test_contended.py), which would hold them.
            out.append("contended_share = 1.0")
    path.write_text("\n".join(out) + "\n")
    return path


def harness_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness", *args]


def run_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for harness/asv subprocesses: no inherited engine overrides, the project
    importable (the scratch copy sits first on sys.path when it is the cwd)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECDEC_", "MLX_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(extra or {})
    return env


MACHINE = "e2e"
ARTIFACTS = REPO / "build" / "artifacts"
TIMINGS: dict[str, dict[str, float | dict]] = {}


def record_timing(name: str, seconds: float | dict, artifact: str = "asv-e2e.json") -> None:
    """A timing of an end-to-end step, kept in build/artifacts/<artifact> (one file per test module:
    make test runs modules in parallel)."""
    TIMINGS.setdefault(artifact, {})[name] = seconds if isinstance(seconds, dict) else round(seconds, 1)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / artifact
    old = json.loads(path.read_text()) if path.exists() else {}
    old.update(TIMINGS[artifact])
    path.write_text(json.dumps(old, indent=1, sort_keys=True) + "\n")


def run_quiet(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


class Scratch:
    def __init__(self, root: Path):
        self.root = root
        self.proj = root / "project"
        self.machine_file = root / "asv-machine.json"
        self.suite = fast_suite(root / "fast-suite.toml")
        self.env = run_env({"HARNESS_ASV_SUITE": str(self.suite)})
        self.shas: dict[str, str] = {}

    def harness(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return run_quiet(harness_argv(*args), self.proj, self.env, timeout)

    def asv(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "harness.ci.asvtool", "--machine-file", str(self.machine_file), "--", *args]
        return run_quiet(argv, self.proj, self.env, timeout)

    def figures(self, sha: str) -> dict:
        sys.path.insert(0, str(REPO))
        from harness.ci.asvtool import load_config, load_figures
        return load_figures(load_config(self.proj / "asv.conf.json"), MACHINE, sha)


def new_scratch(root: Path, work: float) -> Scratch:
    """A scratch project with its commits (make_scratch) and this host registered as MACHINE."""
    s = Scratch(root)
    s.shas = make_scratch(s.root, work)
    r = s.harness("host", "register", "--machine", MACHINE, "--machine-file", str(s.machine_file))
    assert r.returncode == 0, r.stderr
    return s
