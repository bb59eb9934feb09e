"""`harness changes`: the change points of this host's series, read from its asv results."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from harness.analyze.paired import share_text
from harness.ci.acks import acks_path, load_acks
from harness.ci.asvtool import configured_suite, load_config
from harness.ci.history import alert_title, confidence_text, detect, suite_table
from harness.ci.machine import default_machine_file
from harness.ci.nightly import branch_commits
from harness.ci.prcheck import ensure_machine

NAME = "changes"


def run(args: argparse.Namespace) -> int:
    conf = load_config(args.config)
    acks = load_acks(conf.root, acks_path(conf))      # a malformed file is one line, before anything is read
    mf = Path(args.machine_file).expanduser() if args.machine_file else default_machine_file()
    machine = args.machine or ensure_machine(mf, None)["machine"]
    commits = list(reversed(branch_commits(conf.root, args.branch, args.since)))
    h = detect(conf, machine, commits, suite_table(configured_suite(conf)), acks)
    out = Console() if Console().is_terminal else Console(width=200)
    t = Table(title=f"{machine}: {len(h.found)} step(s) in {h.series} series over {h.commits} commits "
                    f"(false-discovery rate {share_text(h.alpha)})", title_justify="left")
    for col in ("step", "commits", "before", "after", "confidence", "asv", "acknowledged"):
        t.add_column(col, overflow="fold")
    for f in h.found:
        s = f.step
        t.add_row(alert_title(f), ", ".join(c[:8] for c in s.commits), f"{s.before:.4g}", f"{s.after:.4g}",
                  "exact" if s.exact else confidence_text(s.confidence), "yes" if s.asv_segments else "no",
                  f.ack.reason if f.ack else "-")
    out.print(t)
    for name, why in h.unstable:
        out.print(f"unstable: {name}: {why}", markup=False, highlight=False)
    if args.json:
        Path(args.json).write_text(json.dumps(h.to_dict(), indent=1, default=str) + "\n", encoding="utf-8")
    print(json.dumps({"kind": "harness.changes", "machine": machine, "series": h.series, "commits": h.commits,
                      "steps": len(h.found), "unstable": len(h.unstable)}, sort_keys=True))
    return 0


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("changes", help="change points of this host's nightly series (from its asv results)",
                       epilog="exit status: 0 listed (steps or none); 2 a problem to fix (one line)")
    p.add_argument("--config", help="asv config (default: ./asv.conf.json)")
    p.add_argument("--branch", default="main", help="the project branch whose history orders the series")
    p.add_argument("--since", help="oldest commit to consider (default: the commit that added asv.conf.json)")
    p.add_argument("--machine", help="asv machine name (default: the only one in the machine file)")
    p.add_argument("--machine-file", help="asv machine file (default: ~/.asv-machine.json)")
    p.add_argument("--json", help="write every step and unstable series here as JSON")
    return p
