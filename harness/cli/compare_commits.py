"""`harness compare-commits BASE HEAD`: two commits run by run on this host, judged paired."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from harness.analyze import envdiff, paired
from harness.analyze.contended import contention_lines
from harness.analyze.summary import check_waiting_lines
from harness.ci.ackfile import DEFAULT as ACKS_DEFAULT
from harness.ci.ackfile import acks_for_check, load_acks
from harness.ci.asvtool import CONFIG_NAME, configured_suite, load_config
from harness.ci.build import rev_parse
from harness.ci.pullrequest import given_suite, load_check_suite, load_notes, side_records
from harness.ci.twocommits import Comparison, compare_commits
from harness.ci.twocommits_summary import EXIT_HELP, summary_json
from harness.cli.session import add_budget_args
from harness.collect.baselines import BaselineStore
from harness.collect.files import check_directory
from harness.collect.suite import DEFAULT_SUITE
from harness.core.errors import UserError
from harness.render.hostwords import set_aside_lines

NAME = "compare-commits"


def check_repo(given: str) -> Path:
    """--repo, resolved: one line when it is not there, not a directory or not in a git repository."""
    repo = Path(given).resolve()
    if not repo.exists():
        raise UserError(f"{given}: no such directory (--repo names the git repository holding both commits)")
    if not repo.is_dir():
        raise UserError(f"{given}: not a directory (--repo names the git repository holding both commits)")
    try:
        r = subprocess.run(["git", "-C", str(repo), "rev-parse", "--git-dir"], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError(f"cannot run git in {repo}: {e}") from None
    if r.returncode != 0:
        raise UserError(f"{given}: not a git repository; pass --repo with the repository holding both commits")
    return repo


def check_suite_file(given: str | None, repo: Path) -> Path:
    """--suite, else $HARNESS_ASV_SUITE, else the suite the repository's asv.conf.json names (its
    own engine's, as pr-check reads it), else the packaged default suite (the embedded pair)."""
    p = given_suite(given)
    if p is not None:
        return p
    conf = repo.resolve() / CONFIG_NAME
    return configured_suite(load_config(conf)) if conf.is_file() else DEFAULT_SUITE


def check_setup(args: argparse.Namespace, kind: str) -> tuple[Path, Any, Path]:
    """The repository, suite, both commits, the acknowledgements file, the baselines file and the
    work directory of compare-commits or bisect (`kind` names the default work directory), each
    checked before anything is said or made: one line when wrong. The suite is check_suite_file's."""
    suite = load_check_suite(check_suite_file(args.suite, Path(args.repo)), args.budget_s, args.threshold,
                             args.alpha)
    repo = check_repo(args.repo)
    for name in (getattr(args, a) for a in ("base", "head", "good", "bad") if hasattr(args, a)):
        rev_parse(repo, name)             # an unknown commit is one line now, not after the work directory
    load_acks(repo, repo / ACKS_DEFAULT)  # a malformed file is one line now, not after the measuring
    if getattr(args, "baselines", None):
        BaselineStore.load(Path(args.baselines))   # a bad baselines file too
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = Path(args.work) if args.work else repo / ".harness" / kind / stamp
    check_directory(work, "work directory (--work)")
    return repo, suite, work


def run(args: argparse.Namespace) -> int:
    repo, suite, work = check_setup(args, "compare")
    print(f"harness: measuring suite {suite.path} in {work}", file=sys.stderr, flush=True)
    store = BaselineStore.load(Path(args.baselines)) if args.baselines else None
    c = compare_commits(repo, args.base, args.head, suite, work, store=store, console=Console(stderr=True),
                        command=args.invocation.command)
    acks, covered = acks_for_check(repo, repo / ACKS_DEFAULT, c.base, c.head)
    c.apply_acks(acks, covered)
    out = Console() if Console().is_terminal else Console(width=200)
    records = side_records(c.records)
    # A side contended past its share, then waiting that took the check: said first.
    # Runs set aside for their host (a backup, battery, thermal pressure, GPU) are named next.
    for line in (contention_lines(c.notes.contention) + set_aside_lines(c.notes.contention)
                 + check_waiting_lines(records, c.duration_s)):
        out.print(line, markup=False, highlight=False)
    diffs = c.notes.environment
    out.print(envdiff.diff_sentence(diffs, c.notes.environment_compared), markup=False,
              highlight=False)   # before any figure
    for d in diffs:
        out.print(f"  {d.what}: {d.a} -> {d.b}", markup=False, highlight=False)
    out.print(comparison_table(c))
    for side, n in load_notes(records).items():
        # What pr-check's comment lists under "Load and time": a busy host shows here too.
        out.print(f"{side}: {n.runs} measured runs, {n.failed} failed, {n.contended} contended, "
                  f"{n.quiet_wait_timeouts} quiet-wait timeouts ({c.records[side]})", markup=False, highlight=False)
    print(json.dumps(summary_json(c), sort_keys=True, default=str), flush=True)
    return c.exit_status


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser("compare-commits", help="two commits run by run on this host, judged paired",
                       epilog=EXIT_HELP)
    p.add_argument("base", help="the reference commit")
    p.add_argument("head", help="the commit under test")
    p.add_argument("--repo", default=".", help="the git repository holding both commits (default: .)")
    p.add_argument("--work", help="where the exported trees, records and worker logs go "
                                  "(default: REPO/.harness/compare/<date-time>)")
    add_budget_args(p)
    return p


def comparison_table(c: Comparison) -> Any:

    t = Table(title=f"{c.head[:8]} against {c.base[:8]}: {c.headline()}", title_justify="left")
    for col in ("verdict", "figure", "arm", "base", "head", "pairs", "change (interval)", "detectable", "note"):
        t.add_column(col, overflow="fold")
    for fig in c.figures:
        r = fig.result
        t.add_row(r.verdict if fig.gated else f"{r.verdict} (diag.)", fig.figure, fig.arm,
                  "-" if fig.base_median is None else f"{fig.base_median:.4g}",
                  "-" if fig.head_median is None else f"{fig.head_median:.4g}", str(r.n),
                  paired.ratio_text(r), paired.detectable_text(r), f"acknowledged: {fig.ack}" if fig.ack else r.note,
                  style="red" if fig.gated and fig.failing else None)
    return t
