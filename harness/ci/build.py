"""Each commit's engine, built before it is measured, and a refusal to compare one binary with itself.

A command engine may declare how a commit is built (`build = ["cargo", "build", "--release"]` in
the suite's `[engines.NAME]` table): an argv run inside the commit's exported tree, which its
arms then name with `{tree}` (harness.collect.tree). compare-commits, pr-check and bisect export
such a commit once into the repository's `.harness/builds/<sha12>-<hash>/` (the hash is of the
build argvs), build it there, and mark it built (`.harness-build.json`, with the build's time and
output tail): a commit measured again is not rebuilt. A tree without the mark (a build that
failed or was stopped) is exported and built anew.

Without a build, a commit's tree is exported as before, and an engine that reads its code from
the tree as it runs (`{python} -m pkg` with the tree on PYTHONPATH, or `interpreted = true`)
measures each commit's own code. Any other command that resolves to one executable outside both
trees would measure the same program twice and report no change: `refuse_shared_executable`
stops the check with one line first.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import string
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

try:
    import fcntl
except ImportError:   # Windows: builds of one commit are not serialized there
    fcntl = None  # type: ignore[assignment]

from harness.core.errors import UserError

if TYPE_CHECKING:
    from harness.ci.asvtool import AsvConfig
    from harness.collect.suite import Arm
    from harness.core.declare import EngineDecl

MARK = ".harness-build.json"
LOG = ".harness-build.log"
BUILD_TIMEOUT_S = 3600.0
TAIL_LINES = 20


@dataclass
class BuildInfo:
    """How one commit's tree was built, for the record's side info and the comparison JSON."""
    commit: str
    tree: str                  # the built tree: the worker's engine root and `{tree}`
    argv: list[list[str]]      # each build command, in the order run
    wall_s: float              # the build's own time (when cached: the time it took then)
    cached: bool               # True: built by an earlier check, not rebuilt now
    tail: list[str]            # the build output's last lines

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self, side: str) -> str:
        """One terminal line."""
        what = " && ".join(" ".join(a) for a in self.argv)
        if self.cached:
            return f"{side} {self.commit[:12]}: reused its build ({self.wall_s:.1f} s when built)"
        return f"{side} {self.commit[:12]}: built in {self.wall_s:.1f} s ({what})"


def builds_of(suite: Any) -> list[list[str]]:
    """The distinct build argvs of the engines the suite's arms run, in arm order."""
    out: list[list[str]] = []
    for arm in suite.arms:
        argv = list(suite.engine(arm).build)
        if argv and argv not in out:
            out.append(argv)
    return out


def cache_dir(repo: Path, sha: str, builds: list[list[str]]) -> Path:
    """Where the commit's built tree is kept: keyed by the commit and the build commands."""
    key = hashlib.sha256(json.dumps(builds).encode()).hexdigest()[:10]
    return Path(repo) / ".harness" / "builds" / f"{sha[:12]}-{key}"


@contextlib.contextmanager
def _locked(dest: Path) -> Iterator[None]:
    """Held while a tree is checked and built: a second check of the same commit (another CI
    job) waits for the first one's build and then reuses it, instead of deleting it midway."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.with_name(dest.name + ".lock"), "a") as f:
        if fcntl is not None:
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def built_tree(repo: Path, sha: str, builds: list[list[str]], export: Any) -> BuildInfo:
    """The commit's tree, built (once: a marked tree is reused). `export(repo, sha, dest)`
    writes the commit's files. A failed build is one line (exit 2) naming the commit."""
    dest = cache_dir(repo, sha, builds)
    with _locked(dest):
        return _build_once(repo, sha, builds, export, dest)


class _Mark(msgspec.Struct):
    """A built tree's mark (MARK): what the build took, and its output's last lines."""
    wall_s: float
    tail: list[str] | None = None


def _build_once(repo: Path, sha: str, builds: list[list[str]], export: Any, dest: Path) -> BuildInfo:
    mark = dest / MARK
    if mark.is_file():
        try:
            d = msgspec.json.decode(mark.read_bytes(), type=_Mark)
            return BuildInfo(sha, str(dest), builds, d.wall_s, True, list(d.tail or []))
        except (OSError, msgspec.DecodeError):
            pass   # an unreadable mark: built again below
    if dest.exists():
        shutil.rmtree(dest)
    export(repo, sha, dest)
    t0 = time.monotonic()
    tail: list[str] = []
    for argv in builds:
        rc, out = _run_build(argv, dest)
        tail = (tail + out)[-TAIL_LINES:]
        if rc != 0:
            last = " | ".join(line.strip() for line in out[-3:] if line.strip()) or "no output"
            raise UserError(f"build of commit {sha[:12]} failed ({' '.join(argv)}: {rc}): {last[-300:]} "
                            f"(full log: {dest / LOG})")
    info = BuildInfo(sha, str(dest), builds, round(time.monotonic() - t0, 3), False, tail)
    mark.write_text(json.dumps({"wall_s": info.wall_s, "tail": tail, "argv": builds}), encoding="utf-8")
    return info


def _run_build(argv: list[str], tree: Path) -> tuple[int | str, list[str]]:
    """(exit status or what stopped it, output lines) of one build command run in the tree; its
    whole output is appended to the tree's build log."""
    env = dict(os.environ)
    # A shared cargo target directory would make both commits' binaries one file.
    env.pop("CARGO_TARGET_DIR", None)
    try:
        p = subprocess.run(argv, cwd=tree, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace", timeout=BUILD_TIMEOUT_S)
        rc: int | str = p.returncode
        out = p.stdout
    except FileNotFoundError:
        rc, out = "not found", f"{argv[0]}: no such program"
    except subprocess.TimeoutExpired as e:
        rc = f"stopped after {BUILD_TIMEOUT_S:.0f} s"
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
    with open(tree / LOG, "a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(argv)}\n{out}\n")
    return rc, out.splitlines()


# --- the refusal -------------------------------------------------------------------------

def program(arm: Any, tree: Path) -> Path | None:
    """The executable an arm's command[0] names when run with this tree as `{tree}` and working
    directory (as a worker runs it); None when it cannot be told before running."""
    first = arm.command[0]
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(first) if f is not None}
    except ValueError:
        return None
    if not fields <= {"tree", "python"}:
        return None
    name = first.format(tree=str(tree), python=sys.executable)
    if os.sep in name or (os.altsep and os.altsep in name):
        p = Path(name) if Path(name).is_absolute() else tree / name
    else:
        # The PATH the command adapter gives the engine: the harness's environment first.
        found = shutil.which(name, path=os.pathsep.join([str(Path(sys.executable).parent),
                                                         os.environ.get("PATH", "")]))
        if found is None:
            return None
        p = Path(found)
    return Path(os.path.realpath(p))


def interpreted(arm: Arm, decl: EngineDecl) -> bool:
    """Whether the arm's program reads the commit's code from the tree it runs in."""
    if decl.interpreted is not None:
        return decl.interpreted
    return arm.command is not None and arm.command[0] == "{python}"


def refuse_shared_executable(suite: Any, trees: dict[str, Path]) -> None:
    """One line (exit 2) when a command arm would run the same executable, outside both trees,
    for both commits: the check would measure one program against itself."""
    for arm in suite.arms:
        if arm.adapter != "command" or not arm.command or interpreted(arm, suite.engine(arm)):
            continue
        roots = {side: Path(os.path.realpath(t)) for side, t in trees.items()}
        progs = {side: program(arm, root) for side, root in roots.items()}
        if any(p is None or not p.exists() for p in progs.values()):
            continue   # not there yet or not knowable: the runs say what is wrong
        first, *others = [p for p in progs.values() if p is not None]
        inside = any(p.is_relative_to(roots[s]) for s, p in progs.items() if p is not None)
        if not inside and others and all(os.path.samefile(first, p) for p in others):
            raise UserError(f"arm {arm.name!r} runs {first} for both commits, outside their trees, so the check "
                            f"would compare one build with itself: declare build = [...] in [engines.{arm.engine}] "
                            "and name the program with {tree} (or interpreted = true if the program reads "
                            "each commit's code from its tree)")


def side_trees(repo: Path, suite: Any, work: Path, shas: dict[str, str], export: Any,
               say: Any = None) -> dict[str, tuple[Path, BuildInfo | None]]:
    """Each side's engine root (side -> sha given): the built tree when the suite's engines
    declare a build, else the commit exported under work/trees/; then the refusal above.
    `say(line)` is told what is built, one line a side."""
    builds = builds_of(suite)
    out: dict[str, tuple[Path, BuildInfo | None]] = {}
    for side, sha in shas.items():
        if not builds:
            out[side] = (export(repo, sha, work / "trees" / f"{side}-{sha[:12]}"), None)
            continue
        if say and not (cache_dir(repo, sha, builds) / MARK).is_file():
            say(f"{side} {sha[:12]}: building ({' && '.join(' '.join(a) for a in builds)})")
        info = built_tree(repo, sha, builds, export)
        if say:
            say(info.line(side))
        out[side] = (Path(info.tree), info)
    if len(set(shas.values())) > 1:   # a commit against itself (an A/A check) is asked for as such
        refuse_shared_executable(suite, {side: root for side, (root, _) in out.items()})
    return out


def check_asv_builds(conf: AsvConfig, suite: Any) -> None:
    """One line (exit 2) when an arm runs its engine's build from `{tree}` but asv.conf.json
    copies no built tree into asv's environment (where `{tree}` looks under asv): the nightly's
    asv runs would not measure each commit's own build."""
    from harness.collect.tree import ASV_TREE

    arms = [a.name for a in suite.arms
            if suite.engine(a).build and a.command and any("{tree}" in part for part in a.command)]
    if not arms or any(ASV_TREE in str(c) for c in conf.fields.install_command or []):
        return
    argv = " ".join(builds_of(suite)[0])
    raise UserError(f"arm {arms[0]!r} runs its engine's build from {{tree}}, but asv.conf.json puts no built "
                    f"tree in asv's environment ({ASV_TREE}): run `harness init --build '{argv}' --force`, "
                    "or copy its build_command and install_command (docs/own-engine.md, \"A compiled engine\")")


def rev_parse(repo: Path, name: str) -> str:
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError(f"cannot run git in {repo}: {e}") from None
    if out.returncode != 0 or not out.stdout.strip():
        raise UserError(f"unknown commit '{name}' in {repo} (git rev-parse found nothing)")
    return out.stdout.strip()


def export_commit(repo: Path, sha: str, dest: Path) -> Path:
    """The commit's tree, as git stores it, in dest (no checkout: the repository is untouched)."""
    try:
        data = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", sha],
                              capture_output=True, timeout=300, check=True).stdout
    except subprocess.CalledProcessError as e:
        raise UserError(f"git archive {sha[:12]} failed in {repo}: "
                        f"{e.stderr.decode(errors='replace').strip()[:200]}") from None
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest
