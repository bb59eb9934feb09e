"""`harness nightly`: measure the commits of main this host has not measured, publish, push.

1. Fetch the results repository (one directory per host: results/<machine>/ for asv,
   records/<machine>/ for the harness sessions' records and their Markdown, baselines/<machine>.json
   for the arms' own baselines) and copy what it has into the local asv results directory.
2. `asv run --record-samples` on the newest commits of the branch without results for this
   machine (a commit whose engine fails to build or crashes is stored as failed and the run
   goes on to the next).
3. `asv publish` (every host's results, so one dashboard shows them all; its JavaScript made
   local, harness.ci.dashboard), and Markdown for the new records if this checkout has
   `harness report`.
4. Change points over every series of this host (harness.ci.history): a new step is alerted
   once (alerts/<machine>/: Markdown, Atom feed, the notification command); acknowledged
   ones are listed with their reason.
5. Copy this host's files into the results repository, commit, push. A rejected push (another
   host pushed first) is fetched, merged (per-host directories never conflict) and retried.

An unreachable results repository ends the command with one line and a non-zero status;
nothing is lost: local results stay in results/, and a commit that could not be pushed stays in
the results checkout and goes out with the next push.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from harness.ci.ackfile import acks_path, load_acks
from harness.ci.asvtool import AsvConfig, configured_suite, load_config, result_commits, run_asv
from harness.ci.build import check_asv_builds
from harness.ci.dashboard import publish_harness
from harness.ci.history import alert_title, detect, file_alerts, notify_command, suite_table
from harness.ci.reportfiles import Backfill, render_missing
from harness.ci.site import write_changes
from harness.collect.files import check_writable
from harness.collect.suite import load_suite
from harness.core.errors import UserError

PUSH_ATTEMPTS = 4
DEFAULT_MAX_COMMITS = 5


# --- the results repository ------------------------------------------------------------

def _git_error(e: Exception) -> str:
    text = (getattr(e, "stderr", "") or str(e)).strip()
    lines = [ln.strip().removeprefix("stderr:").strip().strip("'") for ln in text.splitlines() if ln.strip()]
    useful = [ln for ln in lines if "fatal" in ln or "error" in ln.lower()] or lines
    return useful[0] if useful else type(e).__name__


def default_checkout(url: str) -> Path:
    import hashlib
    # Outside the workspace: CI's checkout step cleans the workspace, and an unpushed
    # commit must survive until the next push.
    return Path.home() / ".cache" / "harness" / f"results-{hashlib.sha256(url.encode()).hexdigest()[:12]}"


def open_results_repo(url: str, checkout: Path, branch: str) -> Any:
    """Clone (first time) or fetch and merge `branch` (later); UserError when unreachable."""
    import git

    try:
        if (checkout / ".git").exists():
            repo = git.Repo(checkout)
            repo.remotes.origin.fetch()
            _merge_remote(repo, branch)
        else:
            checkout.parent.mkdir(parents=True, exist_ok=True)
            repo = git.Repo.clone_from(url, checkout)
    except git.GitCommandError as e:
        raise UserError(f"results repository {url} is unreachable: {_git_error(e)}") from None
    if repo.head.is_valid() and repo.active_branch.name != branch:
        try:
            repo.git.checkout(branch)
        except git.GitCommandError:
            repo.git.checkout("-b", branch)
    elif not repo.head.is_valid():
        repo.git.checkout("--orphan", branch)  # an empty repository: the first push creates it
    return repo


def _merge_remote(repo: Any, branch: str) -> None:
    import git

    ref = f"origin/{branch}"
    if ref not in [r.name for r in repo.remotes.origin.refs]:
        return  # the branch does not exist on the remote yet
    if not repo.head.is_valid():
        repo.git.checkout("-B", branch, ref)
        return
    try:
        repo.git.merge("--no-edit", ref)
    except git.GitCommandError as e:
        repo.git.merge("--abort")
        raise UserError(f"results repository: merging {ref} failed ({_git_error(e)}); "
                        f"another host wrote into this host's directory?") from None


def push_with_retry(repo: Any, branch: str, attempts: int = PUSH_ATTEMPTS, url: str = "") -> int:
    """Push HEAD to `branch`; on rejection fetch, merge, retry. Returns the attempts used."""
    import git

    for attempt in range(1, attempts + 1):
        try:
            infos = repo.remotes.origin.push(refspec=f"HEAD:refs/heads/{branch}")
        except git.GitCommandError as e:
            msg = _git_error(e)
            if "rejected" not in msg and "fetch first" not in msg and "non-fast-forward" not in msg:
                raise UserError(f"results repository {url or 'origin'} is unreachable: {msg} "
                                f"(the commit is kept in {repo.working_dir}; the next nightly pushes it)") from None
            infos = None
        bad = infos is None or any(i.flags & (i.ERROR | i.REJECTED | i.REMOTE_REJECTED) for i in infos)
        if not bad:
            return attempt
        print(f"harness: push rejected (attempt {attempt}); fetching and merging", file=sys.stderr)
        try:
            repo.remotes.origin.fetch()
        except git.GitCommandError as e:
            raise UserError(f"results repository {url or 'origin'} is unreachable: {_git_error(e)}") from None
        _merge_remote(repo, branch)
    raise UserError(f"results repository: push still rejected after {attempts} attempts "
                    f"(the commit is kept in {repo.working_dir})")


def commit_paths(repo: Any, paths: list[str], message: str, machine: str) -> bool:
    """Stage and commit `paths` (relative to the repository); False when nothing changed."""
    import git

    existing = [p for p in paths if (Path(repo.working_dir) / p).exists()]
    if not existing:
        return False
    repo.git.add("--all", "--", *existing)
    if repo.head.is_valid() and not repo.index.diff("HEAD"):
        return False
    actor = git.Actor(f"harness nightly ({machine})", f"harness-nightly@{machine}")
    repo.index.commit(message, author=actor, committer=actor)
    return True


# --- copying between the local asv results and the results repository --------------------

def copy_tree(src: Path, dst: Path, overwrite: bool) -> int:
    n = 0
    if not src.is_dir():
        return 0
    for f in src.rglob("*"):
        if f.is_file():
            t = dst / f.relative_to(src)
            if overwrite or not t.exists():
                t.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, t)
                n += 1
    return n


def sync_in(repo_dir: Path, results_dir: Path, machine: str) -> int:
    """Every host's results from the repository into the local results directory. This host's
    local files win (they may be newer than the last push); other hosts' come from the repo."""
    n = 0
    src = repo_dir / "results"
    if not src.is_dir():
        return 0
    for d in sorted(p for p in src.iterdir() if p.is_dir()):
        n += copy_tree(d, results_dir / d.name, overwrite=d.name != machine)
    return n


# --- which commits -----------------------------------------------------------------------

def branch_commits(root: Path, branch: str, since: str | None) -> list[str]:
    """First-parent history of `branch`, newest first, back to `since` (default: the commit
    that added asv.conf.json, before which there was no asv suite to run)."""
    import git

    repo = git.Repo(root)
    try:
        tip = repo.commit(branch).hexsha
    except (git.BadName, ValueError):
        raise UserError(f"unknown branch or commit '{branch}' in {root}") from None
    if since is None:
        added = repo.git.log("--diff-filter=A", "--format=%H", tip, "--", "asv.conf.json").split()
        since = added[-1] if added else None
    elif since:
        try:
            since = repo.commit(since).hexsha
        except (git.BadName, ValueError):
            raise UserError(f"--since: unknown commit '{since}'") from None
    out = []
    for c in repo.git.rev_list("--first-parent", tip).split():
        out.append(c)
        if since and c == since:
            break
    return out


# --- the command -------------------------------------------------------------------------

@dataclass
class NightlyResult:
    machine: str
    measured: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    pushed: bool = False
    push_attempts: int = 0
    reports: int = 0
    stages_s: dict[str, float] = field(default_factory=dict)   # where the night's time went
    alerts: list[dict[str, Any]] = field(default_factory=list)   # new this night: id, title, file
    history: dict[str, Any] = field(default_factory=dict)        # series, steps, acknowledged, unstable

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.stages_s[name] = round(self.stages_s.get(name, 0.0) + time.monotonic() - t0, 1)


def seed_baselines(conf: AsvConfig, path: Path) -> None:
    """The arms' own baselines, recorded from this checkout when the host has none yet."""
    if path.exists():
        return
    print(f"harness: no baselines for this host yet; recording them from this checkout into {path}",
          file=sys.stderr)
    suite = os.getenv("HARNESS_ASV_SUITE") or str(configured_suite(conf))
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([sys.executable, "-m", "harness", "baseline", "record", suite, "--baselines",
                            str(path), "--record", str(Path(tmp) / "baseline.json")],
                           capture_output=True, text=True, cwd=conf.root)  # this checkout's engine
    if p.returncode != 0:
        print(f"harness: warning: recording baselines failed (exit {p.returncode}); the identity figure "
              f"stays n/a: {(p.stderr or p.stdout).strip()[-300:]}", file=sys.stderr)


class _SuiteEngines(msgspec.Struct):
    """The suite file's [engines.NAME] tables, as the file gives them."""
    engines: Any = None


def nightly(results_repo: str, config: str | None = None, branch: str = "main", results_branch: str = "main",
            machine: str | None = None, machine_file: str | None = None, max_commits: int = DEFAULT_MAX_COMMITS,
            since: str | None = None, checkout: str | None = None, push: bool = True,
            echo: bool = True, backfill: Backfill | None = None) -> NightlyResult:
    from harness.ci.machine import default_machine_file
    from harness.ci.pullrequest import ensure_machine

    if max_commits < 1:
        raise UserError(f"--max-commits must be at least 1, got {max_commits}")
    conf = load_config(config)
    # What the change-point stage needs is checked before anything is measured: a malformed
    # acknowledgements file or notification command is one line now, not after the night's runs.
    acks = load_acks(conf.root, acks_path(conf))
    suite_settings = suite_table(configured_suite(conf))
    # A compiled engine's build must be asv's too, or no commit measures a build of its own.
    engines = msgspec.convert(suite_settings, _SuiteEngines).engines
    if isinstance(engines, dict) and any(isinstance(e, dict) and "build" in e for e in engines.values()):
        check_asv_builds(conf, load_suite(configured_suite(conf)))
    notify = notify_command(conf)
    mf = Path(machine_file).expanduser() if machine_file else default_machine_file()
    co = Path(checkout).expanduser() if checkout else default_checkout(results_repo)
    t0 = time.monotonic()
    # The results repository first: when it cannot be reached, nothing (the machine file) is written.
    repo = open_results_repo(results_repo, co, results_branch)
    repo_dir = Path(repo.working_dir)
    m = ensure_machine(mf, machine).machine
    check_writable(conf.results_dir / m / "results.json", "asv results")
    sync_in(repo_dir, conf.results_dir, m)
    out = NightlyResult(m, stages_s={"sync": round(time.monotonic() - t0, 1)})

    measured = result_commits(conf, m) if (conf.results_dir / m).is_dir() else set()
    todo = [c for c in branch_commits(conf.root, branch, since) if c not in measured][:max_commits]
    records = repo_dir / "records" / m
    baselines = repo_dir / "baselines" / f"{m}.json"
    if todo:
        with out.stage("baselines"):
            seed_baselines(conf, baselines)
        records.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", suffix=".hashes", delete=False) as hf:
            hf.write("\n".join(todo) + "\n")
        try:
            with out.stage("asv run"):
                r = run_asv(["run", f"HASHFILE:{hf.name}", "--machine", m, "--record-samples", "--show-stderr"],
                            conf, mf, env={"HARNESS_ASV_RECORDS": str(records),
                                           "HARNESS_BASELINES": str(baselines)}, echo=echo)
        finally:
            os.unlink(hf.name)
        if "Benchmarking" not in r.output:
            tail = " | ".join(r.output.strip().splitlines()[-3:])
            raise UserError(f"asv run did not benchmark anything (exit {r.returncode}): {tail}")
        now = result_commits(conf, m)
        out.measured = [c for c in todo if c in now]
        out.failed = [c for c in out.measured if _all_failed(conf, m, c)] + [c for c in todo if c not in now]
    with out.stage("publish"):
        if not (conf.results_dir / "benchmarks.json").exists():
            run_asv(["run", "--bench", "just-discover", "--machine", m], conf, mf, echo=echo)
        from harness.ci.dashboard import publish
        publish(str(conf.path), vendor=True, echo=echo, backfill=backfill)   # asv publish; the libraries made local
    with out.stage("reports"):
        out.reports = render_missing(records, backfill)

    copy_tree(conf.results_dir / m, repo_dir / "results" / m, overwrite=True)
    with out.stage("changes"):
        alerts_dir = repo_dir / "alerts" / m
        history_window = list(reversed(branch_commits(conf.root, branch, since)))
        h = detect(conf, m, history_window, suite_settings, acks)
        out.alerts = file_alerts(h, history_window, alerts_dir, notify)
        write_changes(alerts_dir, h.to_dict())   # every step, acknowledged ones too: the dashboard's
        out.history = {"series": h.series, "commits": h.commits, "steps": len(h.found),
                       "acknowledged": [{"title": alert_title(f), "reason": f.ack.reason} for f in h.found if f.ack],
                       "unstable": len(h.unstable)}
    with out.stage("publish"):   # the harness's pages again, now with this night's records and alerts
        publish_harness(conf, repo_dir / "records", repo_dir / "alerts", backfill=backfill)
    paths = [f"results/{m}", f"records/{m}", f"baselines/{m}.json", f"alerts/{m}"]
    msg = f"nightly {m}: {len(out.measured)} commit(s) measured" + (
        f" ({', '.join(c[:8] for c in out.measured)})" if out.measured else "")
    with out.stage("push"):
        committed = commit_paths(repo, paths, msg, m)
        if push and (committed or _ahead(repo, results_branch)):
            out.push_attempts = push_with_retry(repo, results_branch, url=results_repo)
            out.pushed = True
    return out


def _ahead(repo: Any, branch: str) -> bool:
    """True when the checkout has commits the remote branch lacks (an earlier failed push)."""
    if not repo.head.is_valid():
        return False
    ref = f"origin/{branch}"
    if ref not in [r.name for r in repo.remotes.origin.refs]:
        return True
    return bool(repo.git.rev_list(f"{ref}..HEAD").strip())


def _all_failed(conf: AsvConfig, machine: str, commit: str) -> bool:
    from harness.ci.asvtool import load_figures

    figs = load_figures(conf, machine, commit)
    return bool(figs) and all(f.failed or f.skipped for f in figs.values()) and any(f.failed for f in figs.values())
