"""Judge a stored check's per-pair log ratios again with this harness's paired verdict: what
the pairs support now, at the last look's level, with the pairs the threshold needs at their
spread (paired.plan), and a replay of the looks a budget would have taken (equal shares of the
pairs it bought, each judged at its alpha-spending level), stopping at the first that resolves.

Reads any JSON written by scripts/studies/asv_sensitivity.py, or a file of docs/measurements/ that
nests such rows: every object with "pairs": {arm: {"logs": [...]}} is one check.

    PYTHONPATH=. .venv/bin/python scripts/studies/rejudge_pairs.py FILE.json [--arm classic] [--threshold 0.02]
        [--budget-pairs N]   # pairs the check's budget bought (default: the pairs it has)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from harness.analyze import paired
from harness.analyze.design import Design, detectable_change
from harness.analyze.estimators import serial_inflation


def checks(node: Any, where: str = "") -> Iterator[tuple[str, dict]]:
    """(where, row) for every row that carries per-pair logs."""
    if isinstance(node, dict):
        if isinstance(node.get("pairs"), dict):
            yield where, node
        for k, v in node.items():
            if k != "pairs":
                yield from checks(v, f"{where}.{k}" if where else k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from checks(v, f"{where}[{i}]")


def judge(logs: np.ndarray, design: Design) -> paired.Paired:
    return paired.analyze(np.ones(logs.size), np.exp(logs), design)


def line(p: paired.Paired) -> str:
    return f"{p.verdict} {paired.ratio_text(p)}, detectable {paired.detectable_text(p)} ({p.location})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--arm", default="classic")
    ap.add_argument("--threshold", type=float, default=0.02)
    ap.add_argument("--looks", type=int, default=4)
    ap.add_argument("--figures", type=int, default=1, help="gated figures the check's level is split over")
    ap.add_argument("--budget-pairs", type=int, default=None)
    args = ap.parse_args()
    try:
        data = json.loads(args.file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        print(f"rejudge_pairs: cannot read {args.file}: {e}", file=sys.stderr)
        return 2
    design = Design(threshold=args.threshold, looks=args.looks, figures=args.figures)
    found = 0
    for where, row in checks(data):
        logs = (row["pairs"].get(args.arm) or {}).get("logs")
        if not logs:
            continue
        found += 1
        x = np.asarray(logs, dtype=float)
        kurt = float(((x - x.mean()) ** 4).mean() / x.var() ** 2 - 3.0)
        print(f"{where} ({row.get('head', '?')}): {x.size} pairs, sd {x.std(ddof=1):.1%}, kurtosis {kurt:.1f}")
        whole = judge(x, design)
        need = paired.plan(whole, design)
        # What the mean alone (the verdict before the typical pair) could have seen in the same pairs.
        alone = detectable_change(x.std(ddof=1) * serial_inflation(x)[0], x.size, design)
        print(f"  all pairs, last look: {line(whole)}; {args.threshold:.0%} needs "
              f"{'more than 100000' if need is None else need} pairs at this spread; the mean alone: "
              f"detectable {alone:.1%}")
        bought = args.budget_pairs or x.size
        for look in range(1, args.looks + 1):
            n = math.ceil(bought * look / args.looks)
            if n > x.size:
                print(f"  look {look}: needs {n} pairs, {x.size} recorded")
                break
            p = judge(x[:n], replace(design, look=look))
            print(f"  look {look}, {n} pairs: {line(p)}")
            if p.resolved:
                break
    if not found:
        print(f"rejudge_pairs: no per-pair logs of arm {args.arm!r} in {args.file}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
