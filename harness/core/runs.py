"""Which of a record's runs count: the one definition every layer reads.

A run is measured unless it is a warm-up, and ok unless it failed (an engine error, a result
the gate refused, or a run set aside on load). Statistics, identity and figures read the
measured ok runs; a few readers also take ok warm-ups (a shape's first use, an output to
compare), and say so by calling `is_ok` alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

R = TypeVar("R", bound=Mapping[str, Any])


def is_ok(run: Mapping[str, Any]) -> bool:
    """The run finished ok (a warm-up too)."""
    return run.get("status") == "ok"


def measured_ok(run: Mapping[str, Any]) -> bool:
    """The run is measured (not a warm-up) and finished ok."""
    return not run.get("warmup") and is_ok(run)


def measured_ok_runs(runs: Iterable[R]) -> list[R]:
    """The measured ok runs of `runs` (a record's "runs", or some of them), in their order."""
    return [r for r in runs if measured_ok(r)]
