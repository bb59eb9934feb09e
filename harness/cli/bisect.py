"""`harness bisect GOOD BAD --arm A --figure F`: the first commit at which a figure got worse."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
from pathlib import Path
from typing import Any

from harness.ci.bisect import Probe, bisect
from harness.ci.prcheck import load_check_suite
from harness.cli.session import add_budget_args
from harness.collect.suite import DEFAULT_SUITE

NAME = "bisect"


def run(args: argparse.Namespace) -> int:
    repo = Path(args.repo).resolve()
    suite = load_check_suite(Path(args.suite) if args.suite else DEFAULT_SUITE, args.budget_s, args.threshold,
                             args.alpha)
    work = Path(args.work) if args.work else repo / ".harness" / "bisect" / _dt.datetime.now().strftime("%Y%m%d-%H%M%S")

    def report(p: Probe) -> None:
        print(f"probe {p.probe[:12]} against {p.good[:12]}: {p.verdict}, {args.arm} {args.figure} {p.change} "
              f"over {p.pairs} pairs (smallest detectable {p.detectable}; {p.seconds:.0f} s)", flush=True)

    b = bisect(repo, args.good, args.bad, args.arm, args.figure, suite, work, report=report)
    if b.first_bad:
        print(f"first bad commit: {b.first_bad} ({len(b.probes)} probes)")
    else:
        print(f"stopped: {b.stopped}; range: {', '.join(c[:12] for c in b.range)}")
    print(json.dumps(b.to_dict(), sort_keys=True), flush=True)
    return 0 if b.first_bad else 3


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("bisect", help="the first commit of GOOD..BAD at which a figure got worse (paired probes)",
                       epilog="exit status: 0 the first bad commit found; 3 stopped with a range (BAD not worse "
                              "here, or a probe inconclusive); 2 a problem to fix (one line)")
    p.add_argument("good", help="a commit where the figure was as expected")
    p.add_argument("bad", help="a later commit where it is worse")
    p.add_argument("--arm", required=True, help="the arm whose figure got worse")
    p.add_argument("--figure", default="ms/token",
                   help="the figure: ms/token (default), ms/round, 'phase ms/round: NAME', or its id (ms_per_token)")
    p.add_argument("--repo", default=".", help="the git repository holding both commits (default: .)")
    p.add_argument("--work", help="where each probe's trees and records go (default: REPO/.harness/bisect/<date-time>)")
    add_budget_args(p)
    return p
