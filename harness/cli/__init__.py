"""The `harness` command: one registry of commands, one module each.

Each command module has NAME, `add_parser(subparsers) -> parser` and `run(args) -> int`; a
module with PASSTHROUGH = True gets every argument after its name as `args.rest`, options
included. `main(argv)` builds the parser, parses argv (passed explicitly) and turns the
errors a user can fix into one line and exit 2, an interrupt into exit 130.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from harness.cli import (
    baseline,
    bisect,
    changes,
    check,
    compare_commits,
    dashboard,
    host,
    init,
    nightly,
    pr_check,
    project,
    report,
    run,
    schema,
)
from harness.cli.session import Invocation
from harness.core import interrupt
from harness.core.errors import UserError

# In the order `harness --help` lists them.
COMMANDS: tuple[ModuleType, ...] = (run, check, baseline, project, report, host, pr_check, compare_commits,
                                    nightly, changes, bisect, dashboard, init, schema)


def version() -> str:
    """This harness's version, as installed (whichever distribution ships the harness package)."""
    from importlib.metadata import PackageNotFoundError, packages_distributions
    from importlib.metadata import version as installed
    try:
        return installed(packages_distributions()["harness"][0])
    except (KeyError, IndexError, PackageNotFoundError):   # a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description="Benchmark harness for MLX speculative decoding")
    # Said by main() before any parsing (a command is required otherwise).
    p.add_argument("--version", action="store_true", help="print the harness's version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for mod in COMMANDS:
        mod.add_parser(sub).set_defaults(_command=mod)
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    by_name = {mod.NAME: mod for mod in COMMANDS}
    mod = by_name.get(argv[0]) if argv else None
    if mod is not None and getattr(mod, "PASSTHROUGH", False):
        return argparse.Namespace(_command=mod, command=mod.NAME, rest=argv[1:])
    return build_parser().parse_args(argv)


def _interrupt(signum: int, frame: Any) -> None:
    # Ctrl-C or a kill: the command child is killed and the record says so. A second one while
    # that is saved must not cut the saving short, so from here on both are ignored.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    interrupt.request()   # kept even where the exception below is swallowed (a fork's hooks)
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--version"]:
        print(f"harness {version()}")
        return 0
    try:
        args = parse(argv)
        args.invocation = Invocation(argv)   # reads this host: Ctrl-C may land here too
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _interrupt)
            signal.signal(signal.SIGINT, _interrupt)
            sys.unraisablehook = interrupt.unraisable_hook
        return int(args._command.run(args) or 0)
    except UserError as e:
        print(f"harness: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:   # its text, if any, says what was kept
        print("harness: interrupted" + (f"; {e}" if str(e) else ""), file=sys.stderr)
        return 130
