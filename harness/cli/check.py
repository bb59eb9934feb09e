"""`harness check SUITE`: one run per arm and prompt, each output against its own baseline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.table import Table

from harness.cli.session import (
    console_out,
    identity_session,
    new_session,
    print_summary,
)
from harness.core.errors import UserError

NAME = "check"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    c = sub.add_parser("check", help="compare each arm's output with its own baseline",
                       epilog="exit status: 0 every output identical to its baseline; 1 a difference, "
                              "a failed run, or an arm without a baseline; 2 a problem to fix")
    c.add_argument("suite")
    c.add_argument("--baselines", help="baselines file (default: baselines/<host>.json)")
    c.add_argument("--record", help="record path for the check session")
    c.add_argument("--yes", action="store_true",
                   help="run a plan above the bounds (10,000 runs, or an estimated 24 h); one no session finishes (over 1,000,000 runs, or a year) is refused even so")
    return c


def run(args: argparse.Namespace) -> int:
    """One run per arm and prompt, compared with each arm's own baseline."""
    suite, record_path, baselines = identity_session(args, 1, "check")
    if not baselines.is_file():
        # Every run would end "no baseline": say so before running any.
        raise UserError(f"{baselines}: no baselines file; record one with `harness baseline record "
                        f"{args.suite}" + (f" --baselines {baselines}`" if args.baselines else "`")
                        + ", or pass --baselines")
    record = new_session(args.invocation, suite, record_path, baselines, {"purpose": "check", "quick": False},
                         yes=args.yes)
    return report(record, baselines, args.suite)


def report(record: Any, baselines: Path, suite_arg: str) -> int:
    """The identity table and the summary; the exit status (`harness run --resume` of a check too)."""
    from harness.analyze.identity import describe
    out = console_out()
    t = Table(title=f"identity against own baselines ({baselines})", title_justify="left")
    for col in ("arm", "prompt", "identity", "label"):
        t.add_column(col, overflow="fold")
    verdicts = []
    for r in record.runs:
        ident = r.get("identity") or {}
        verdicts.append(ident.get("status"))
        t.add_row(r["arm"], r["prompt"], describe(ident) if r["status"] == "ok" else f"failed: {r['error']}",
                  r.get("label") or "-")
    out.print(t)
    print_summary(record, f"{record.data['suite']['name']}: {record.path}")
    if "no_baseline" in verdicts:
        print(f"harness: some arms have no baseline in {baselines}; record them with "
              f"`harness baseline record {suite_arg}`", file=sys.stderr)
    ok = all(v == "identical" for v in verdicts)
    return 0 if ok else 1
