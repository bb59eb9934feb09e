"""Reading the acknowledgements file and resolving its commits with git (harness.analyze.acks)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.analyze.acks import Ack, parse
from harness.ci.asvtool import AsvConfig
from harness.core.errors import UserError
from harness.core.tomlfile import read_toml

CONFIG_KEY = "harness_acknowledgements"
DEFAULT = "benchmarks/acknowledgements.toml"


def acks_path(conf: AsvConfig) -> Path:
    p = Path(conf.data.get(CONFIG_KEY) or DEFAULT)
    return p if p.is_absolute() else conf.root / p


def _git(repo: Path, *args: str) -> list[str]:
    r = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if r.returncode != 0:
        raise ValueError(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"git {args[0]} failed")
    return r.stdout.split()


def resolve(repo: Path, spec: str) -> frozenset[str]:
    """The full SHAs a commits spec names: one commit, or A..B."""
    if ".." in spec:
        return frozenset(_git(repo, "rev-list", spec))
    return frozenset(_git(repo, "rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}"))


def load_acks(repo: Path, path: Path) -> list[Ack]:
    """The file's entries with their commits resolved; none when the file does not exist."""
    if not path.exists():
        return []
    data = read_toml(path, "the acknowledgements")
    out = []
    for i, (spec, figure, arm, reason, by) in enumerate(parse(data, str(path))):
        try:
            commits = resolve(repo, spec)
        except ValueError as e:
            raise UserError(f"{path}: acknowledge[{i}]: commits {spec!r} names no commit in {repo} ({e})") from None
        if not commits:
            raise UserError(f"{path}: acknowledge[{i}]: commits {spec!r} names no commit in {repo}")
        who, on = origin(repo, path, reason)
        out.append(Ack(spec, figure, arm, reason, commits, by or who, on))
    return out


def origin(repo: Path, path: Path, reason: str) -> tuple[str, str]:
    """(author, YYYY-MM-DD) of the commit that added the entry with this reason to the file (the
    oldest that changed how often the reason occurs), else of the file's last commit; ("", "")
    when git does not know the file."""
    for args in (["-S" + reason], ["-1"]):
        try:
            r = subprocess.run(["git", "log", "--format=%an%x09%as", *args, "--", str(path.resolve())],
                               cwd=repo, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return "", ""
        lines = r.stdout.strip().splitlines() if r.returncode == 0 else []
        if lines:
            who, _, on = lines[-1].partition("\t")
            return who, on
    return "", ""


def acks_for_check(repo: Path, path: Path, base: str, head: str) -> tuple[list[Ack], list[str]]:
    """The acknowledgements, and the commits a check of BASE..HEAD covers (those in HEAD's history
    but not BASE's)."""
    acks = load_acks(repo, path)
    if not acks:
        return [], []
    try:
        return acks, _git(repo, "rev-list", f"{base}..{head}")
    except ValueError as e:
        raise UserError(f"{repo}: cannot list {base[:12]}..{head[:12]}: {e}") from None
