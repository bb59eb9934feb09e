"""`harness report RECORD [--compare RECORD] | --index`: render records as Markdown."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.ci.reportfiles import Backfill, check_figures, context_for, index_text, report_files, write_figures
from harness.collect.files import check_output, marked, write_output, written_by
from harness.core.errors import UserError
from harness.render.reportcontext import render

NAME = "report"
REPORT, INDEX = "report", "report --index"   # the writers their markers name


def run(args: argparse.Namespace) -> int:
    out: Path | None
    if args.index:
        if args.record or args.compare:
            raise UserError("--index renders every record in the reports directory; drop RECORD and --compare")
        d = Path(args.reports_dir)
        if not d.is_dir():
            raise UserError(f"{d}: no reports directory")
        out = Path(args.out) if args.out else d / "README.md"
        check_output(out, "index")           # what it holds, its name, the place: before anything is rendered
        text, skipped = index_text(d, args.template or "index", backfill())
        if args.out:
            check_output(out, "index", writer=INDEX, earlier=same_first_line(text))
        else:
            check_earlier_index(out, text)
        for why in skipped:
            print(f"harness: skipped {why}", file=sys.stderr)
    else:
        if not args.record:
            raise UserError("report needs a RECORD (or --index)")
        out = Path(args.out) if args.out else None
        figs: list[tuple[Path, str]] = []
        if out is None:
            ctx = context_for(args.record, args.compare, backfill())    # stdout: no place for figures
        else:
            check_output(out, "report")
            ctx, figs = report_files(args.record, args.compare, out, backfill())
        text = render(ctx, args.template or "record")
        if out is not None:
            check_output(out, "report", writer=REPORT, earlier=same_first_line(text))
            check_figures(figs)
            write_figures(figs)
    if out is None:
        sys.stdout.write(text)
    else:
        # The marker, in the file only: the next run knows the file as its own (stdout is the user's).
        write_output(out, marked(text, INDEX if args.index else REPORT), "index" if args.index else "report")
        print(f"harness: wrote {out}", file=sys.stderr)
    return 0


def backfill() -> Backfill:
    """What a record older than schema 3 or 4 lacks (its host spec, its tensor tables), read
    by collection's readers here, where the command is put together."""
    from harness.collect.host.specs import match_spec
    from harness.collect.models import model_files

    def host_spec(host: dict[str, Any]) -> dict[str, Any] | None:
        spec = match_spec(host)
        return spec.as_dict() if spec else None
    return Backfill(host_spec=host_spec, models=model_files)


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0].rstrip("\r")


def same_first_line(text: str) -> Callable[[str], bool]:
    """An earlier rendering without the marker (from before markers, or stdout redirected into the
    file) starts with the line about to be written: the record's title, the index's heading."""
    return lambda old: _first_line(old) == _first_line(text)


def check_earlier_index(readme: Path, text: str) -> None:
    """The default index path, REPORTS_DIR/README.md, is replaced only when it is an earlier index
    (its marker, or its first line the one about to be written) or empty: a README the user wrote is kept."""
    if readme.is_file() and not written_by(readme, INDEX, earlier=same_first_line(text)):
        try:
            first = _first_line(readme.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"{readme}: cannot read it to see whether it is an earlier index ({e}); "
                            "pass --out FILE for the index") from None
        raise UserError(f"{readme}: not an index `harness report --index` wrote (its first line is "
                        f"{first[:60]!r}); writing the index there would replace it; "
                        "pass --out FILE for the index")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser("report", help="render a record (optionally against another) as Markdown",
                       epilog="templates: harness/templates/NAME.md.j2; a file of the same name in "
                              "./reports/templates/ wins. exit status: 0 written; 2 a problem to fix "
                              "(one line on stderr: unreadable, truncated or other-schema record, records "
                              "of different pairings, unknown template)")
    p.add_argument("record", nargs="?", help="record JSON")
    p.add_argument("--compare", metavar="RECORD", help="a second record: before/after on one host, "
                                                         "cross-host otherwise (RECORD is A/before)")
    p.add_argument("--template", metavar="NAME", help="template name (default: record, or index with --index)")
    p.add_argument("--out", metavar="FILE", help="write here, its figures in a folder named after FILE (FILE.md -> FILE/NAME.svg) "
                                                 "(default: stdout, without figures; with --index, REPORTS_DIR/README.md, "
                                                 "replaced only when it is an earlier index); never over a "
                                                 "record, another harness JSON file or a file the "
                                                 "harness did not write (its marker, the last line)")
    p.add_argument("--index", action="store_true", help="regenerate the index of every record in the reports directory")
    p.add_argument("--reports-dir", default="reports", help="where --index looks (default: reports)")
    return p

