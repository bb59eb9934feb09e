"""`harness pr-check BASE HEAD`: the two commits run by run, judged paired, stored in asv,
rendered as Markdown for the pull request."""

from __future__ import annotations

import argparse

from harness.ci.pullrequest import pr_check
from harness.ci.twocommits_summary import EXIT_HELP
from harness.cli.session import add_budget_args

NAME = "pr-check"


def run(args: argparse.Namespace) -> int:
    return pr_check(args.base, args.head, config=args.config, machine=args.machine,
                    machine_file=args.machine_file, suite=args.suite, budget_s=args.budget_s,
                    threshold=args.threshold, baselines=args.baselines, output=args.output,
                    json_out=args.json, asv=not args.no_asv, alpha=args.alpha,
                    report_url=args.report_url, dashboard_url=args.dashboard_url)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser("pr-check", help="BASE and HEAD run by run, judged paired, stored in asv, "
                                        "rendered as Markdown for a PR", epilog=EXIT_HELP)
    p.add_argument("base", help="the commit to compare against (e.g. origin/main)")
    p.add_argument("head", help="the commit under test")
    p.add_argument("--config", help="asv config (default: ./asv.conf.json)")
    p.add_argument("--machine", help="asv machine name (default: the only one in the machine file)")
    p.add_argument("--machine-file", help="asv machine file (default: ~/.asv-machine.json; "
                                          "this host is registered there if it is empty)")
    add_budget_args(p)
    p.add_argument("--output", help="write the Markdown here too (the workflow posts it)")
    p.add_argument("--json", help="write every judgement as JSON here")
    p.add_argument("--no-asv", action="store_true", help="do not store the samples in asv's results")
    # Set once for a team in asv.conf.json; the options are for one check (or a CI job's own URL).
    p.add_argument("--report-url", help="link the comment to this report (default: asv.conf.json's "
                                        "\"harness_report_url\"; {base}, {head} and {machine} are filled in; "
                                        "'' for none)")
    p.add_argument("--dashboard-url", help="link the comment to this dashboard (default: asv.conf.json's "
                                           "\"harness_dashboard_url\"; same fields; '' for none)")
    return p
