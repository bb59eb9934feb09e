"""A Ctrl-C or SIGTERM that must not be lost.

The CLI's handler raises KeyboardInterrupt where the signal lands; when that is inside a
callback CPython runs for a fork (subprocess.Popen runs logging's at-fork hooks), the exception
is printed as "ignored" and dropped, and the session would run on and exit 0. So the handler
also sets this flag, and the runner checks it at every run boundary; `unraisable_hook` keeps
the dropped one off the terminal (it is not lost, the flag carries it).
"""

from __future__ import annotations

import sys
from typing import Any

_requested = False


def request() -> None:
    """Called by the signal handler, before it raises."""
    global _requested
    _requested = True


def requested() -> bool:
    return _requested


def check() -> None:
    """Raise KeyboardInterrupt if an interrupt arrived and was swallowed on its way."""
    if _requested:
        raise KeyboardInterrupt


def unraisable_hook(unraisable: Any) -> None:
    """sys.unraisablehook: a KeyboardInterrupt the flag already holds is not printed."""
    if _requested and isinstance(unraisable.exc_value, KeyboardInterrupt):
        return
    sys.__unraisablehook__(unraisable)
