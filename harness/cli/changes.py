"""`harness changes`: the change points of this host's series, read from its asv results; with
--alerts, the alerts filed earlier that an acknowledgement now covers are marked acknowledged."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from harness.analyze.design import share_text
from harness.ci.ackfile import acks_path, load_acks
from harness.ci.asvtool import configured_suite, load_config
from harness.ci.history import acknowledge_alerts, alert_title, confidence_text, detect, suite_table
from harness.ci.machine import default_machine_file, read_machine_file
from harness.ci.nightly import branch_commits
from harness.ci.pullrequest import ensure_machine
from harness.collect.files import check_output, write_output
from harness.core.errors import UserError

NAME = "changes"
KIND = "harness.changes"


def known_machines(conf: Any, machine_file: Path) -> list[str]:
    """The machines `changes` can read: those in the machine file and those with asv results."""
    names = set(read_machine_file(machine_file))
    if conf.results_dir.is_dir():
        names |= {d.name for d in conf.results_dir.iterdir() if (d / "machine.json").is_file()}
    return sorted(names)


def check_machine(conf: Any, machine_file: Path, machine: str) -> None:
    """One line when --machine names a machine neither the machine file nor asv's results know."""
    known = known_machines(conf, machine_file)
    if machine not in known:
        fix = (f"known: {', '.join(known)}; pass one of those to --machine" if known else
               "none known: register this host with `harness host register`, or pass --machine-file")
        raise UserError(f"no machine named '{machine}' in {machine_file} or {conf.results_dir} ({fix})")


def run(args: argparse.Namespace) -> int:
    conf = load_config(args.config)
    acks = load_acks(conf.root, acks_path(conf))      # a malformed file is one line, before anything is read
    mf = Path(args.machine_file).expanduser() if args.machine_file else default_machine_file()
    if args.json:
        check_output(Path(args.json), "changes JSON (--json)", own_kind=KIND, writer="changes")
    alerts = Path(args.alerts) if args.alerts else None
    if alerts is not None and not (alerts / "state.json").is_file():
        raise UserError(f"{alerts}: no state.json, so no alerts filed there; pass the results repository's "
                        "alerts/<machine> directory the nightly writes")
    if args.machine:
        check_machine(conf, mf, args.machine)
    machine = args.machine or ensure_machine(mf, None).machine
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
        write_output(Path(args.json), json.dumps({"kind": KIND, **h.to_dict()}, indent=1, default=str) + "\n",
                     "changes JSON (--json)")
    marked = None
    if alerts is not None:
        marked = acknowledge_alerts(h, commits, alerts)
        for aid in marked:
            print(f"harness: marked {alerts / (aid + '.md')} acknowledged", file=sys.stderr)
    line = _Line(kind=KIND, machine=machine, series=h.series, commits=h.commits, steps=len(h.found),
                 unstable=len(h.unstable), acknowledged_alerts=marked)
    print(json.dumps(msgspec.to_builtins(line), sort_keys=True))
    return 0


class _Line(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The summary line on stdout; acknowledged_alerts only with --alerts."""
    kind: str
    machine: str
    series: int
    commits: int
    steps: int
    unstable: int
    acknowledged_alerts: list[str] | None = None


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser("changes", help="change points of this host's nightly series (from its asv results)",
                       epilog="exit status: 0 listed (steps or none); 2 a problem to fix (one line)")
    p.add_argument("--config", help="asv config (default: ./asv.conf.json)")
    p.add_argument("--branch", default="main", help="the project branch whose history orders the series")
    p.add_argument("--since", help="oldest commit to consider (default: the commit that added asv.conf.json)")
    p.add_argument("--machine", help="asv machine name (default: the only one in the machine file)")
    p.add_argument("--machine-file", help="asv machine file (default: ~/.asv-machine.json)")
    p.add_argument("--json", help="write every step and unstable series here as JSON")
    p.add_argument("--alerts", metavar="DIR", help="the nightly's alerts/<machine> directory: mark the alerts "
                   "an acknowledgement now covers (the nightly does this each night)")
    return p
