"""`harness init`: set up an engine repository for the harness."""

from __future__ import annotations

import argparse
import shlex
import sys

from harness.ci.init import init
from harness.core.errors import UserError

NAME = "init"


def run(args: argparse.Namespace) -> int:
    try:
        command = shlex.split(args.command) if args.command is not None else None
    except ValueError as e:   # an unterminated quote or a trailing backslash
        raise UserError(f"--command {args.command!r}: cannot split it like a shell ({e}); "
                        "close its quotes or escape them") from None
    if command is not None and not command:
        raise UserError("--command is empty: give the engine's command line, e.g. "
                        "--command 'my-engine generate --prompt-file {prompt_file}'")
    try:
        build = shlex.split(args.build) if args.build is not None else None
    except ValueError as e:
        raise UserError(f"--build {args.build!r}: cannot split it like a shell ({e}); "
                        "close its quotes or escape them") from None
    if build is not None and not build:
        raise UserError("--build is empty: give the command that builds a commit, e.g. "
                        "--build 'cargo build --release'")
    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()] if args.hosts else None
    res = init(args.dir, force=args.force, harness_spec=args.harness_spec, command=command,
               hosts=hosts, target=args.model, build=build)
    for rel in res.written:
        print(f"wrote {res.root / rel}")
    if res.gitignore_added:
        print(f"added to {res.root / '.gitignore'}: {' '.join(res.gitignore_added)}")
    for w in res.warnings:
        print(f"harness: warning: {w}", file=sys.stderr)
    print("next: commit these files, then `harness run benchmarks/suite.toml`, `asv run`, "
          "`harness pr-check BASE HEAD`")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser("init", help="set up an engine repository: asv.conf.json, benchmarks/, a starter "
                                    "suite, hosts/, the PR and nightly workflows",
                       epilog="exit status: 0 written; 2 a problem to fix (not a git repository, or files "
                              "that exist without --force)")
    p.add_argument("--dir", default=".", help="a directory in the engine's git repository (default: .)")
    p.add_argument("--force", action="store_true", help="overwrite files that exist")
    p.add_argument("--command", help="the engine's command line for the starter arm (split like a shell; "
                                     "placeholders such as {prompt_file} {max_tokens} {seed} {python})")
    p.add_argument("--build", help="the command that builds a commit of a compiled engine, run in the "
                                   "commit's tree (split like a shell, e.g. 'cargo build --release'); "
                                   "name the built program in --command with {tree}")
    p.add_argument("--model", default="..", help="the starter pairing's model directory, relative to "
                                                 "benchmarks/ (default: .., the repository)")
    p.add_argument("--harness-spec", help="pip requirement that installs this harness in asv's environment "
                                          "and CI (default: how this harness was installed)")
    p.add_argument("--hosts", help="comma-separated host spec names for the workflows' runners "
                                   "(default: this host's spec, else every known one)")
    return p
