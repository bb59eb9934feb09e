"""Which repository and commit a record measured, and which harness measured it.

The repository under test is the engine's, not the harness's: the git repository of the
working directory, or under asv the directory asv runs from ($ASV_CONF_DIR) with the commit
asv installed ($ASV_COMMIT). The harness's own version and location go beside it.

Fields of the repo section: path, commit, short_commit, branch, dirty, source
("git": read from the working tree; "asv": $ASV_COMMIT of a clean asv build).
Fields of the harness section: version, location, commit, dirty (commit and dirty are
"unknown" unless the harness runs from a git checkout, as an editable install does).
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from typing import Any

from harness.core.hostinfo import HarnessInfo, RepoInfo

UNKNOWN = "unknown"
ASV_COMMIT = "ASV_COMMIT"        # asv 0.6: set for benchmarks run in an environment it built
ASV_CONF_DIR = "ASV_CONF_DIR"    # asv 0.6: the directory asv runs from, in every environment


def _git_repo(start: str | Path) -> Any:
    import git

    try:
        return git.Repo(start, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def repo_root(start: str | Path | None = None) -> Path | None:
    """The root of the repository under test: `start`'s git repository; without `start`, the
    one asv runs from ($ASV_CONF_DIR, which a session under asv inherits), else the cwd's."""
    where = start if start is not None else os.environ.get(ASV_CONF_DIR) or os.getcwd()
    try:
        r = _git_repo(where)
    except ImportError:  # gitpython without a git executable
        return None
    return Path(r.working_tree_dir) if r is not None and r.working_tree_dir else None


def _describe(r: Any, sha: str) -> str:
    # A commit asv built is usually not checked out: name it by the branch that reaches it.
    try:
        name = r.git.name_rev("--name-only", "--no-undefined", "--refs=refs/heads/*", sha).strip()
    except Exception:  # noqa: BLE001 - no branch contains it (a PR head fetched by sha)
        return UNKNOWN
    return name or UNKNOWN


def repo_info(repo: str | Path | None = None) -> RepoInfo:
    """The repository under test: path, commit, short_commit, branch, dirty, source."""
    out = RepoInfo()
    asv_commit = os.environ.get(ASV_COMMIT) if repo is None else None
    where = repo if repo is not None else os.environ.get(ASV_CONF_DIR) or os.getcwd()
    r = _git_repo(where)   # ImportError (no git executable) becomes the section's error
    if asv_commit:
        # asv checked this commit out into a build directory of its own and installed it:
        # a clean tree of exactly that commit, whatever the working tree holds.
        out = RepoInfo(commit=asv_commit, short_commit=asv_commit[:8], dirty=False, source="asv")
        if r is not None:
            out.path = str(r.working_tree_dir)
            out.branch = _describe(r, asv_commit)
            try:
                out.short_commit = r.git.rev_parse("--short", asv_commit)
            except Exception:  # noqa: BLE001 - asv's repo is elsewhere: keep 8 characters
                pass
        return out
    if r is None:
        return out
    out.path = str(r.working_tree_dir)
    out.branch = "detached" if r.head.is_detached else r.active_branch.name
    try:
        sha = r.head.commit.hexsha
    except ValueError:  # a repository with no commit yet
        return out
    # Untracked files count as dirty: a new source file changes what ran.
    out.dirty = r.is_dirty(untracked_files=True)
    out.commit = sha
    out.short_commit = r.git.rev_parse("--short", sha)
    return out


def harness_distribution() -> str | None:
    """The distribution that installed the `harness` package, whatever it is named."""
    names = importlib.metadata.packages_distributions().get("harness")
    return names[0] if names else None


def harness_version() -> str:
    try:
        dist = harness_distribution()
        return importlib.metadata.version(dist) if dist else UNKNOWN
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


def harness_info() -> HarnessInfo:
    """The harness that measured: version, location, and its commit when it is a checkout."""
    location = Path(__file__).resolve().parents[1]
    out = HarnessInfo(version=harness_version(), location=str(location))
    try:
        r = _git_repo(location)
        # A checkout of the harness holds this package at its top; one installed into a venv
        # inside another repository (an engine's) does not: the version is all there is.
        if r is None or (Path(r.working_tree_dir).resolve() / "harness") != location:
            return out
        out.commit = r.head.commit.hexsha
        # Only the harness's own files: the engine's changes in the same checkout are the repo's.
        out.dirty = bool(r.git.status("--porcelain", "--", "harness").strip())
    except Exception:  # noqa: BLE001 - provenance never loses a record
        pass
    return out
