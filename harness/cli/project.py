"""`harness project ...`: cost-model projections; every argument after "project" is the cost
model's own (harness.analyze.costmodel.project_cli parses them)."""

from __future__ import annotations

import argparse

from harness.analyze import costmodel

NAME = "project"
PASSTHROUGH = True   # the registry hands this command every argument after its name, options included


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser("project", help="cost-model projections (harness.analyze.costmodel)", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    return p


def run(args: argparse.Namespace) -> int:
    return int(costmodel.project_cli(list(args.rest)) or 0)
