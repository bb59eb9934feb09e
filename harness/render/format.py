"""The one set of formatters every renderer uses: numbers, percentages, lists, "-" for none."""

from __future__ import annotations

import math
from typing import Any


def f(x: float | None, spec: str, dash: str = "-") -> str:
    return dash if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def pct(x: float | None, digits: int = 1) -> str:
    return f(None if x is None else 100 * x, f".{digits}f") + ("%" if x is not None else "")


def signed_pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def names(xs: list[str]) -> str:
    return ", ".join(xs) if xs else "none"


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def section(host: dict[str, Any], name: str) -> dict[str, Any]:
    s = host.get(name)
    return s if isinstance(s, dict) else {}


