"""`python -m harness ...` and the `harness` command."""

import sys


def run() -> None:
    """The console script: main() behind an import that Ctrl-C may interrupt (it loads numpy,
    rich and the commands), which then ends with one line and 130, not a traceback."""
    try:
        from harness.cli import main
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    raise SystemExit(main())


if __name__ == "__main__":
    run()
