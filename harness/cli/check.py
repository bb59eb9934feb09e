"""`harness check SUITE`: one run per arm and prompt, each output against its own baseline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.table import Table

from harness.cli.session import (
    console_out,
    default_baselines_path,
    default_record_path,
    in_process_engines_first,
    new_session,
    print_summary,
)

NAME = "check"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    c = sub.add_parser("check", help="compare each arm's output with its own baseline",
                       epilog="exit status: 0 every output identical to its baseline; 1 a difference, "
                              "a failed run, or an arm without a baseline; 2 a problem to fix")
    c.add_argument("suite")
    c.add_argument("--baselines", help="baselines file (default: baselines/<host>.json)")
    c.add_argument("--record", help="record path for the check session")
    return c


def run(args: argparse.Namespace) -> int:
    """One run per arm and prompt, compared with each arm's own baseline."""
    from dataclasses import replace

    from harness.analyze.identity import describe
    from harness.collect.suite import load_suite, with_settings
    inv = args.invocation
    suite = load_suite(args.suite)
    in_process_engines_first(suite)
    # Identity does not depend on timing: no warm-up, no cooldown, no quiet gate.
    suite = with_settings(suite, repetitions=1, warmups=0, cooldown_s=0.0, cooldown_ratio=0.0, cooldown_cap_s=None,
                          cooldown_source="check", budget_s=None,
                          quiet=replace(suite.settings.quiet, enabled=False))
    record_path = Path(args.record) if args.record else default_record_path(inv, suite.name, "check")
    baselines = Path(args.baselines) if args.baselines else default_baselines_path(inv)
    record = new_session(inv, suite, record_path, baselines, {"purpose": "check", "quick": False})
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
    print_summary(record, f"{suite.name}: {record.path}")
    if "no_baseline" in verdicts:
        print(f"harness: some arms have no baseline in {baselines}; record them with "
              f"`harness baseline record {args.suite}`", file=sys.stderr)
    ok = all(v == "identical" for v in verdicts)
    return 0 if ok else 1
