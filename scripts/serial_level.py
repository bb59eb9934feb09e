"""How often does the paired verdict call a no-change "worse" or "improved" when successive pairs
are alike? A simulation through harness.analyze.paired.analyze, against the independent-pairs
t interval on the same data (docs/statistics.md, "Successive pairs are not independent").

Per-pair log ratios are an AR(1) series with no change (lag-1 autocorrelation RHO, sd 0.1);
each check is judged at one look and one figure, alpha 5% over both directions.

    PYTHONPATH=. .venv/bin/python scripts/serial_level.py [--sims 3000]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from harness.analyze import paired
from harness.analyze.stats import scipy_stats


def ar1(rng: np.random.Generator, n: int, rho: float, sd: float = 0.1) -> np.ndarray:
    e = rng.normal(0.0, sd, n)
    x = np.empty(n)
    x[0] = e[0] / math.sqrt(1.0 - rho * rho)
    for i in range(1, n):
        x[i] = rho * x[i - 1] + e[i]
    return x


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=3000)
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args()
    design = paired.Design(threshold=0.02, alpha=args.alpha, looks=1, figures=1, floor=1e-6)
    print(f"false alarms for a nominal {args.alpha:.1%} ({args.sims} simulated checks per row)")
    print(f"{'rho':>5} {'pairs':>6} {'independent':>12} {'harness':>8} {'k median':>9}")
    for rho in (0.0, 0.25, 0.4):
        for n in (10, 20, 60, 300, 800):
            rng = np.random.default_rng(1)
            q = float(scipy_stats().t.ppf(1.0 - args.alpha / 2.0, n - 1))
            plain = alarms = 0
            ks = []
            for _ in range(args.sims):
                x = ar1(rng, n, rho)
                plain += abs(x.mean()) / (x.std(ddof=1) / math.sqrt(n)) > q
                p = paired.analyze(np.ones(n), np.exp(x), design)
                alarms += p.verdict in ("worse", "improved")
                ks.append(p.inflation)
            print(f"{rho:5.2f} {n:6d} {plain / args.sims:12.1%} {alarms / args.sims:8.1%} {float(np.median(ks)):9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
