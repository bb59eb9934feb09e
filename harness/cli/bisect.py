"""`harness bisect GOOD BAD --arm A --figure F`: the first commit at which a figure got worse."""

from __future__ import annotations

import argparse
import json
import sys

from harness.ci.bisect import Trial, bisect
from harness.cli.compare_commits import check_setup
from harness.cli.session import add_budget_args

NAME = "bisect"


def run(args: argparse.Namespace) -> int:
    repo, suite, work = check_setup(args, "bisect")
    print(f"harness: measuring suite {suite.path} in {work}", file=sys.stderr, flush=True)

    def report(p: Trial) -> None:
        print(f"trial {p.commit[:12]} against {p.good[:12]}: {p.verdict}, {args.arm} {args.figure} {p.change} "
              f"over {p.pairs} pairs (smallest detectable {p.detectable}; {p.seconds:.0f} s)", flush=True)

    from rich.console import Console

    # The console says each commit's build (or its reuse) as a trial starts.
    b = bisect(repo, args.good, args.bad, args.arm, args.figure, suite, work, report=report,
               console=Console(stderr=True))
    if b.first_bad:
        print(f"first bad commit: {b.first_bad} ({len(b.trials)} trials)")
    else:
        print(f"stopped: {b.stopped}; range: {', '.join(c[:12] for c in b.range)}")
    print(json.dumps(b.to_dict(), sort_keys=True), flush=True)
    return 0 if b.first_bad else 3


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser("bisect", help="the first commit of GOOD..BAD at which a figure got worse (paired trials)",
                       epilog="exit status: 0 the first bad commit found; 3 stopped with a range (BAD not worse "
                              "here, or a trial inconclusive); 2 a problem to fix (one line)")
    p.add_argument("good", help="a commit where the figure was as expected")
    p.add_argument("bad", help="a later commit where it is worse")
    p.add_argument("--arm", required=True, help="the arm whose figure got worse")
    p.add_argument("--figure", default="ms/token",
                   help="the figure: ms/token (default), ms/round, 'phase ms/round: NAME', or its id (ms_per_token)")
    p.add_argument("--repo", default=".", help="the git repository holding both commits (default: .)")
    p.add_argument("--work", help="where each trial's trees and records go (default: REPO/.harness/bisect/<date-time>)")
    add_budget_args(p)
    return p
