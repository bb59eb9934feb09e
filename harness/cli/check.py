"""`harness check SUITE`: one run per arm and prompt, each output against its own baseline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.cli.output import (
    SUMMARY_KIND,
    Output,
    add_output_args,
    emit_json,
    output_of,
    say,
    session_summary,
    summary_doc,
    width,
)
from harness.cli.session import identity_session, new_session
from harness.core.errors import UserError
from harness.core.schema import Identity, Run

NAME = "check"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    c = sub.add_parser("check", help="compare each arm's output with its own baseline",
                       epilog="exit status: 0 every output identical to its baseline; 1 a difference, "
                              "a failed run, or an arm without a baseline; 2 a problem to fix")
    c.add_argument("suite")
    c.add_argument("--baselines", help="baselines file (default: baselines/<host>.json)")
    c.add_argument("--record", help="record path for the check session")
    c.add_argument("--yes", action="store_true",
                   help="run a plan above the bounds (10,000 runs, or an estimated 24 h); one no session finishes (over 1,000,000 runs, or a year) is refused even so")
    add_output_args(c, per_prompt=False)
    return c


def run(args: argparse.Namespace) -> int:
    """One run per arm and prompt, compared with each arm's own baseline."""
    out = output_of(args)
    suite, record_path, baselines = identity_session(args, 1, "check")
    if not baselines.is_file():
        # Every run would end "no baseline": say so before running any.
        raise UserError(f"{baselines}: no baselines file; record one with `harness baseline record "
                        f"{args.suite}" + (f" --baselines {baselines}`" if args.baselines else "`")
                        + ", or pass --baselines")
    out.check(SUMMARY_KIND, record_path, baselines)
    record = new_session(args.invocation, suite, record_path, baselines, "check",
                         yes=args.yes, quiet=out.quiet)
    return report(record, baselines, args.suite, out)


def identity_lines(record: Any, baselines: Path, width: int) -> list[str]:
    """The finding (how many outputs are identical to their baselines), then a line for each
    output that is not, saying where it differs, or why it was not compared."""
    from harness.analyze.identity import describe
    from harness.render.termsummary import wrap
    runs: list[Run] = [r for r in record.runs if not r.warmup]
    same = sum(r.is_ok and r.identity is not None and r.identity.status == "identical" for r in runs)
    head = (f"all {len(runs)} outputs identical" if same == len(runs) else
            f"{same} of {len(runs)} outputs identical")
    out = wrap(f"identity against own baselines ({baselines}): {head}", width)
    for r in runs:
        ident = r.identity or Identity(status="not_compared")
        if r.is_ok and ident.status == "identical":
            continue
        what = describe(r.identity) if r.is_ok else f"failed: {r.error}"
        out += wrap(f"  {r.arm} on {r.prompt}: {what}", width, indent="    ")
    out += wrap("speed is not judged here: one run per arm and prompt, no warm-up "
                "(`harness run` judges it)", width)
    return out


def report(record: Any, baselines: Path, suite_arg: str, out: Output | None = None) -> int:
    """The identity lines and where the record is; the exit status (`harness run --resume` of a
    check too)."""
    from harness.render.termsummary import where
    out = out or Output()
    console = out.console()
    if console is not None:
        say(console, identity_lines(record, baselines, width(console)) + where(str(record.path), width(console)))
    s, rows = session_summary(record)
    emit_json(out, summary_doc(record, s, rows))
    verdicts = [r.identity.status if r.identity is not None else None for r in record.runs]
    if "no_baseline" in verdicts:
        print(f"harness: some arms have no baseline in {baselines}; record them with "
              f"`harness baseline record {suite_arg}`", file=sys.stderr)
    ok = all(v == "identical" for v in verdicts)
    return 0 if ok else 1
