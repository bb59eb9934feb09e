"""`python -m harness ...` and the `harness` command."""

import os
import sys

INTERRUPTED = 130


def _exit_interrupted() -> None:
    """Exit 130 after Ctrl-C. Not by SystemExit: a Ctrl-C that lands while Python runs a string
    of code (dataclasses generate their __init__ with exec) leaves CPython's "unhandled
    KeyboardInterrupt" flag set, even once caught, and under `python -m` the interpreter then
    ends by re-raising SIGINT on itself (exit -2) whatever status was asked for. Everything the
    command had to save is saved before it returns."""
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    os._exit(INTERRUPTED)


def run() -> None:
    """The console script: main() behind an import that Ctrl-C may interrupt (it loads numpy,
    rich and the commands), which then ends with one line and 130, not a traceback."""
    try:
        from harness.cli import main
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        _exit_interrupted()
    code = main()
    if code == INTERRUPTED:
        _exit_interrupted()
    raise SystemExit(code)


if __name__ == "__main__":
    run()
