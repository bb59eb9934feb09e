"""The one set of formatters every renderer uses: numbers, percentages, lists, "-" for none."""

from __future__ import annotations

import math


def f(x: float | None, spec: str, dash: str = "-") -> str:
    return dash if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def mib(x: int | None, added: int | None = None, unit: str = " MiB") -> str:
    """'812.4 MiB', with '(+3.1)' for what a run added on top of what was resident; '-' if unknown."""
    if x is None:
        return "-"
    return f"{x / 2**20:.1f}{unit}" + ("" if added is None else f" (+{added / 2**20:.1f})")


def pct(x: float | None, digits: int = 1) -> str:
    return f(None if x is None else 100 * x, f".{digits}f") + ("%" if x is not None else "")


def signed_pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def names(xs: list[str]) -> str:
    return ", ".join(xs) if xs else "none"


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))




def speedup(x: float | None, ci: tuple[float, float] | list[float] | None) -> str:
    """'1.64x (1.32-2.16)'; with too few runs for an interval, the ratio says so rather than
    looking as settled as one that has one (analyze.summary.MIN_BOOTSTRAP_RUNS)."""
    if x is None:
        return "-"
    return f"{x:.2f}x ({ci[0]:.2f}-{ci[1]:.2f})" if ci else f"{x:.2f}x (too few runs for an interval)"
