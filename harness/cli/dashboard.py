"""`harness dashboard publish | preview`: the asv dashboard, its libraries made local, and the
harness's own pages beside it (verdicts, series, change points, records)."""

from __future__ import annotations

import argparse

from harness.ci.asvtool import load_config, run_asv
from harness.ci.dashboard import check_published, publish
from harness.cli.report import backfill

NAME = "dashboard"


def run(args: argparse.Namespace) -> int:
    if args.action == "publish":
        html = publish(args.config, vendor=not args.no_vendor, records=args.records, alerts=args.alerts,
                       backfill=backfill())
        print(f"dashboard: {html}/index.html, the harness's pages {html}/harness/index.html "
              "(serve them with `harness dashboard preview`)")
        return 0
    conf = load_config(args.config)
    check_published(conf.html_dir)
    extra = ["--port", str(args.port)] if args.port else []
    return run_asv(["preview", *extra], conf).returncode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser("dashboard", help="publish the dashboard (asv's, libraries made local, and the harness's pages) or preview it",
                       epilog="exit status: 0 published / preview ended; 2 a problem to fix (one line)")
    p.add_argument("action", choices=("publish", "preview"))
    p.add_argument("--config", help="asv config (default: ./asv.conf.json)")
    p.add_argument("--no-vendor", action="store_true", help="keep asv's CDN links")
    p.add_argument("--records", help="the harness records to show (default: $HARNESS_ASV_RECORDS or "
                   ".asv/records; a directory per machine, as the nightly's results repository has, works too)")
    p.add_argument("--alerts", help="the nightly's alerts directory (alerts/<machine>/ of the results repository)")
    p.add_argument("--port", type=int, help="preview port (asv's default otherwise)")
    return p
