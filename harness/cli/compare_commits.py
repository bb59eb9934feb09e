"""`harness compare-commits BASE HEAD`: two commits run by run on this host, judged paired."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from harness.analyze import envdiff, paired
from harness.analyze.identity import BaselineStore
from harness.ci.acks import DEFAULT as ACKS_DEFAULT
from harness.ci.acks import acks_for_check
from harness.ci.commits import EXIT_HELP, Comparison, compare_commits, summary_json
from harness.ci.prcheck import load_check_suite
from harness.cli.session import add_budget_args
from harness.collect.suite import DEFAULT_SUITE

NAME = "compare-commits"


def run(args: argparse.Namespace) -> int:
    repo = Path(args.repo).resolve()
    suite = load_check_suite(Path(args.suite) if args.suite else DEFAULT_SUITE, args.budget_s, args.threshold,
                             args.alpha)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = Path(args.work) if args.work else repo / ".harness" / "compare" / stamp
    store = BaselineStore.load(Path(args.baselines)) if args.baselines else None
    c = compare_commits(repo, args.base, args.head, suite, work, store=store, console=Console(stderr=True),
                        command=args.invocation.command)
    acks, covered = acks_for_check(repo, repo / ACKS_DEFAULT, c.base, c.head)
    c.apply_acks(acks, covered)
    out = Console() if Console().is_terminal else Console(width=200)
    diffs = [envdiff.EnvDifference(**d) for d in c.notes.get("environment", [])]
    out.print(envdiff.diff_sentence(diffs), markup=False, highlight=False)   # before any figure
    for d in diffs:
        out.print(f"  {d.what}: {d.a} -> {d.b}", markup=False, highlight=False)
    out.print(comparison_table(c))
    print(json.dumps(summary_json(c), sort_keys=True, default=str), flush=True)
    return c.exit_status


def add_parser(sub: Any) -> argparse.ArgumentParser:
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
