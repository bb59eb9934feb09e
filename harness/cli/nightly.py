"""`harness nightly`: benchmark new commits of main on this host, publish, push the results."""

from __future__ import annotations

import argparse
import json
import os
import time

import msgspec

from harness.ci.nightly import DEFAULT_MAX_COMMITS, nightly
from harness.cli.report import backfill
from harness.core.errors import UserError

NAME = "nightly"


class _Acknowledged(msgspec.Struct, kw_only=True):
    title: str
    reason: str


class _History(msgspec.Struct, kw_only=True):
    """The night's change points as harness.ci.nightly sums them up."""
    series: int
    commits: int
    steps: int
    unstable: int
    acknowledged: list[_Acknowledged] = []


class _NewAlert(msgspec.Struct, kw_only=True):
    """A new alert as harness.ci.history.file_alerts lists it: the state's fields and its Markdown."""
    title: str
    file: str


def run(args: argparse.Namespace) -> int:
    url = args.results_repo or os.environ.get("HARNESS_RESULTS_REPO")
    if not url:
        raise UserError("no results repository: pass --results-repo URL or set HARNESS_RESULTS_REPO")
    t0 = time.monotonic()
    res = nightly(url, config=args.config, branch=args.branch, results_branch=args.results_branch,
                  machine=args.machine, machine_file=args.machine_file, max_commits=args.max_commits,
                  since=args.since, checkout=args.checkout, push=not args.no_push, backfill=backfill())
    for c in res.measured:
        print(f"measured {c[:8]} on {res.machine}" + (": FAILED (see the dashboard)" if c in res.failed else ""))
    for c in res.failed:
        if c not in res.measured:
            print(f"{c[:8]}: no results stored (asv could not build or run it)")
    if not res.measured and not res.failed:
        print(f"nothing new to measure on {res.machine}")
    hist = msgspec.convert(res.history, _History) if res.history else None
    if hist is not None:
        print(f"changes: {hist.steps} step(s) in {hist.series} series over {hist.commits} commits, "
              f"{len(res.alerts)} new alert(s), {len(hist.acknowledged)} acknowledged, "
              f"{hist.unstable} series too unstable to judge")
    for a in msgspec.convert(res.alerts, list[_NewAlert]):
        print(f"ALERT {a.title} ({a.file})")
    for ack in hist.acknowledged if hist is not None else []:
        print(f"acknowledged: {ack.title}: {ack.reason}")
    print(json.dumps({"kind": "harness.nightly", "machine": res.machine, "measured": res.measured,
                      "failed": res.failed, "pushed": res.pushed, "push_attempts": res.push_attempts,
                      "reports": res.reports, "duration_s": round(time.monotonic() - t0, 1),
                      "stages_s": res.stages_s, "alerts": res.alerts, "history": res.history}, sort_keys=True))
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser("nightly", help="benchmark new commits of main on this host, publish, push results",
                       epilog="exit status: 0 measured (a commit whose engine fails shows as failed on the "
                              "dashboard, and the run goes on), published and pushed; 2 a problem to fix, "
                              "e.g. an unreachable results repository (one line on stderr; local results "
                              "and any unpushed commit are kept)")
    p.add_argument("--results-repo", help="git URL or path of the results repository "
                                          "(default: $HARNESS_RESULTS_REPO)")
    p.add_argument("--checkout", help="local clone of the results repository "
                                      "(default: ~/.cache/harness/results-<hash of the URL>)")
    p.add_argument("--results-branch", default="main", help="branch of the results repository (default main)")
    p.add_argument("--config", help="asv config (default: ./asv.conf.json)")
    p.add_argument("--branch", default="main", help="the project branch to follow (default main)")
    p.add_argument("--since", help="oldest commit to consider (default: the commit that added asv.conf.json)")
    p.add_argument("--max-commits", type=int, default=DEFAULT_MAX_COMMITS,
                   help=f"measure at most this many new commits, newest first (default {DEFAULT_MAX_COMMITS})")
    p.add_argument("--machine", help="asv machine name (default: the only one in the machine file)")
    p.add_argument("--machine-file", help="asv machine file (default: ~/.asv-machine.json)")
    p.add_argument("--no-push", action="store_true", help="commit to the results checkout but do not push")
    return p
