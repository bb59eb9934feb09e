"""`harness host register`: detect this host, match a host spec, write its asv machine entry."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.ci.machine import register

NAME = "host"


def run(args: argparse.Namespace) -> int:
    made, warnings, path = register(args.spec, args.machine,
                                     Path(args.machine_file).expanduser() if args.machine_file else None)
    for w in warnings:
        print(f"harness: warning: {w}", file=sys.stderr)
    entry = made.to_dict()
    width = max(len(k) for k in entry)
    print(f"asv machine entry '{made.machine}' written to {path}:")
    for k in ("machine", "host_spec", "chip", "gpu_generation", "peak_bandwidth",
              "os", "arch", "cpu", "num_cpu", "ram"):
        if k in entry:
            print(f"  {k:<{width}}  {entry[k]}")
    print(json.dumps({"kind": "harness.host.register", "machine_file": str(path), "entry": entry,
                      "warnings": warnings}, sort_keys=True), flush=True)
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    h = sub.add_parser("host", help="this host: register it as an asv machine")
    hs = h.add_subparsers(dest="host_command", metavar="ACTION", required=True)
    r = hs.add_parser("register", help="detect this host, match a hosts/*.json host spec, write its asv machine entry",
                      epilog="exit status: 0 written (warnings on stderr, e.g. an unknown peak); "
                             "2 a problem to fix, e.g. an unknown --spec (one line on stderr)")
    # --profile: the option's name before "host spec" replaced "host profile"; workflows written
    # by an earlier `harness init` still pass it.
    r.add_argument("--spec", "--profile", dest="spec", metavar="NAME",
                   help="use this host spec instead of matching (hosts/NAME.json)")
    r.add_argument("--machine", metavar="NAME", help="asv machine name (default: the host spec's asv_machine, "
                                                     "or the hostname when no host spec matches)")
    r.add_argument("--machine-file", metavar="PATH", help="asv machine file (default: ~/.asv-machine.json)")
    return h
