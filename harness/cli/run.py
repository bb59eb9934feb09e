"""`harness run [SUITE]`: run a suite (the default suite when none is given), or finish one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgspec

from harness.cli.output import BASELINES_KIND, SUMMARY_KIND, Output, add_output_args, output_of, print_summary
from harness.cli.session import (
    cannot_write,
    default_baselines_path,
    default_record_path,
    execute,
    in_process_engines_first,
    new_session,
    session_locks,
)
from harness.core.errors import UserError
from harness.core.schema import Record

NAME = "run"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    r = sub.add_parser("run", help="run a suite (the default suite when none is given)",
                       epilog="exit status: 0 all runs ok; 1 a run failed or an output differs from its "
                              "own baseline; 2 a problem to fix (one line on stderr); 130 interrupted "
                              "(the record keeps every finished run: resume it with --resume)")
    r.add_argument("suite", nargs="?", help="suite TOML (default: harness/suites/default.toml)")
    r.add_argument("--record", help="record path (default: records/<date-time>-<suite>-<host>.json)")
    r.add_argument("--yes", action="store_true",
                   help="run a plan above the bounds (10,000 runs, or an estimated 24 h); one no session finishes (over 1,000,000 runs, or a year) is refused even so")
    r.add_argument("--resume", metavar="RECORD", help="finish the missing runs of an incomplete record")
    r.add_argument("--quick", action="store_true",
                   help="smoke test: 2 repetitions, no warm-up, no cooldown, no quiet wait, <=32 tokens")
    r.add_argument("--baselines", help="baselines file (default: baselines/<host>.json)")
    add_output_args(r)
    return r


def same_host_or_refuse(record: Any, host: dict[str, Any]) -> None:
    """A record's runs come from one host: resuming elsewhere would file this host's runs under
    the recorded host's name (hostname, CPU, GPU and MLX device, as compare matches hosts)."""
    from harness.analyze.compare import host_key
    was, now = host_key(record.data.host), host_key(host)
    if was != now:
        raise UserError(f"{record.path}: recorded on another host ({' / '.join(was)}; this is "
                        f"{' / '.join(now)}); resume it there, or start a new record here")


def unfinished(data: Record) -> bool:
    """Runs to make, or (a baseline session) its baselines still to store."""
    return not data.complete or (data.purpose == "baseline" and data.baselines_stored is None)


def run(args: argparse.Namespace) -> int:
    from harness.collect.suite import load_suite, quick
    inv = args.invocation
    out = output_of(args)
    if args.resume:
        if args.suite or args.quick or args.record:
            raise UserError("--resume takes its suite, settings and path from the record; "
                            "drop SUITE, --quick and --record")
        return resume(args, out)
    suite = load_suite(args.suite)
    in_process_engines_first(suite)
    if args.quick:
        suite = quick(suite)
    record_path = Path(args.record) if args.record else default_record_path(inv, suite.name)
    baselines = Path(args.baselines) if args.baselines else default_baselines_path(inv)
    out.check(SUMMARY_KIND, record_path, baselines)
    record = new_session(inv, suite, record_path, baselines, "run", quick=bool(args.quick),
                         yes=args.yes, quiet=out.quiet)
    return report(record, out)


def report(record: Any, out: Output) -> int:
    print_summary(record, out)
    bad = [r for r in record.runs if not r.is_ok or (r.identity is not None and r.identity.status == "differs")]
    return 1 if bad else 0


def resume(args: argparse.Namespace, out: Output) -> int:
    """Finish a record's session as the command that began it would have: the missing runs, then a
    check's report, or a baseline session's baselines stored (and that command's exit status)."""
    from harness.cli import baseline, check
    from harness.collect.baselines import BaselineStore
    from harness.collect.record import Record
    from harness.collect.recordcheck import check_resumable
    from harness.collect.suite import suite_from_record
    inv = args.invocation
    record = Record.load(args.resume)   # its one-line errors first; read again under the lock
    suite = suite_from_record(msgspec.to_builtins(record.data.suite), str(record.path))
    in_process_engines_first(suite)   # before inv.host() loads MLX
    purpose = record.data.purpose
    baselines = Path(args.baselines or record.data.baselines or default_baselines_path(inv))
    out.check(BASELINES_KIND if purpose == "baseline" else SUMMARY_KIND, record.path, baselines)
    if not unfinished(record.data):
        print(f"harness: {record.path} is complete; nothing to resume (its summary follows)", file=sys.stderr)
        return report(record, out)
    if not record.data.complete:
        check_resumable(record.data, suite, str(record.path))   # missing runs are found by index
        same_host_or_refuse(record, inv.host())
    outcomes: list[Any] = []
    try:
        with session_locks(inv, record.path, baselines if purpose == "baseline" else None, len(record.runs)):
            record = Record.load(record.path)   # what the last writer left, now that none writes
            store = BaselineStore.load(baselines)
            if not record.data.complete:
                record.note_resume(inv.command, inv.host())
                execute(record, suite, store, out.quiet)
            if purpose == "baseline" and record.data.baselines_stored is None:
                outcomes = baseline.store_baselines(record, baselines, bool(record.data.update))
    except OSError as e:
        raise cannot_write(e, record.path, len(record.runs)) from None
    if purpose == "baseline":
        return baseline.show(outcomes, baselines, record, out)
    if purpose == "check":
        return check.report(record, baselines, record.data.suite.path or suite.name, out)
    return report(record, out)
