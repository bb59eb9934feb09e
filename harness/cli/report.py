"""`harness report RECORD [--compare RECORD] | --index`: render records as Markdown."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.ci.reports import context_for, index_text
from harness.collect.record import check_writable
from harness.core.errors import UserError
from harness.render.report import render

NAME = "report"


def run(args: argparse.Namespace) -> int:
    if args.index:
        if args.record or args.compare:
            raise UserError("--index renders every record in the reports directory; drop RECORD and --compare")
        d = Path(args.reports_dir)
        if not d.is_dir():
            raise UserError(f"{d}: no reports directory")
        text, skipped = index_text(d, args.template or "index")
        for why in skipped:
            print(f"harness: skipped {why}", file=sys.stderr)
        out = Path(args.out) if args.out else d / "README.md"
    else:
        if not args.record:
            raise UserError("report needs a RECORD (or --index)")
        text = render(context_for(args.record, args.compare), args.template or "record")
        out = Path(args.out) if args.out else None
    if out is None:
        sys.stdout.write(text)
    else:
        check_writable(out, "report")
        out.write_text(text, encoding="utf-8")
        print(f"harness: wrote {out}", file=sys.stderr)
    return 0


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("report", help="render a record (optionally against another) as Markdown",
                       epilog="templates: harness/templates/NAME.md.j2; a file of the same name in "
                              "./reports/templates/ wins. exit status: 0 written; 2 a problem to fix "
                              "(one line on stderr: unreadable, truncated or other-schema record, records "
                              "of different pairings, unknown template)")
    p.add_argument("record", nargs="?", help="record JSON")
    p.add_argument("--compare", metavar="RECORD", help="a second record: before/after on one host, "
                                                         "cross-host otherwise (RECORD is A/before)")
    p.add_argument("--template", metavar="NAME", help="template name (default: record, or index with --index)")
    p.add_argument("--out", metavar="FILE", help="write here (default: stdout; with --index, REPORTS_DIR/README.md)")
    p.add_argument("--index", action="store_true", help="regenerate the index of every record in the reports directory")
    p.add_argument("--reports-dir", default="reports", help="where --index looks (default: reports)")
    return p

