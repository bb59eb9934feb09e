"""How often does the paired verdict call a no-change "worse" or "improved" when successive pairs
are alike, and how often does it catch a real change? A simulation through
harness.analyze.paired.analyze, against the independent-pairs t interval on the same data
(docs/statistics.md, "Successive pairs are not independent" and "A few disturbed runs").

Per-pair log ratios are an AR(1) series (lag-1 autocorrelation RHO) whose innovations are
normal (sd 0.1) or, with --noise mixed, a scale mixture like the H100's pairs: 85% from sd 0.05
and 15% from sd 0.25 (kurtosis about 10). Each check is judged at one look and one figure,
alpha 5% over both directions. With --shift S every pair also carries a true change of S
(log scale), and the table reads as the rate of catching it.

    PYTHONPATH=. .venv/bin/python scripts/studies/serial_level.py [--sims 3000] [--noise mixed] [--shift 0.02]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from harness.analyze import paired
from harness.analyze.design import Design
from harness.analyze.stats import scipy_stats


def innovations(rng: np.random.Generator, n: int, sd: float, noise: str) -> np.ndarray:
    if noise == "normal":
        return rng.normal(0.0, sd, n)
    wide = rng.random(n) < 0.15
    return rng.normal(0.0, 1.0, n) * np.where(wide, 2.5 * sd, 0.5 * sd)


def ar1(rng: np.random.Generator, n: int, rho: float, sd: float = 0.1, noise: str = "normal") -> np.ndarray:
    e = innovations(rng, n, sd, noise)
    x = np.empty(n)
    x[0] = e[0] / math.sqrt(1.0 - rho * rho)
    for i in range(1, n):
        x[i] = rho * x[i - 1] + e[i]
    return x


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=3000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--noise", choices=("normal", "mixed"), default="normal")
    ap.add_argument("--shift", type=float, default=0.0, help="true change on the log scale (0: false alarms)")
    args = ap.parse_args()
    design = Design(threshold=0.02, alpha=args.alpha, looks=1, figures=1, floor=1e-6)
    what = "false alarms" if args.shift == 0 else f"changes of {args.shift:+.3f} (log) caught"
    print(f"{what} for a nominal {args.alpha:.1%}, {args.noise} noise ({args.sims} simulated checks per row)")
    print(f"{'rho':>5} {'pairs':>6} {'independent':>12} {'harness':>8} {'k median':>9} {'robust':>7}")
    for rho in (0.0, 0.25, 0.4):
        for n in (10, 20, 60, 300, 800):
            rng = np.random.default_rng(1)
            q = float(scipy_stats().t.ppf(1.0 - args.alpha / 2.0, n - 1))
            plain = alarms = robust = 0
            ks = []
            for _ in range(args.sims):
                x = ar1(rng, n, rho, noise=args.noise) + args.shift
                plain += abs(x.mean()) / (x.std(ddof=1) / math.sqrt(n)) > q
                p = paired.analyze(np.ones(n), np.exp(x), design)
                alarms += p.verdict in ("worse", "improved")
                robust += p.location == "huber"
                ks.append(p.inflation)
            print(f"{rho:5.2f} {n:6d} {plain / args.sims:12.1%} {alarms / args.sims:8.1%} "
                  f"{float(np.median(ks)):9.2f} {robust / args.sims:7.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
