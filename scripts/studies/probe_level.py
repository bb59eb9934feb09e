"""Does the dispatch measurement keep the paired verdict's false-alarm level, and what does it buy? A
simulation through harness.analyze.paired.analyze, with and without the probe on the same pairs
(docs/statistics.md, "The dispatch measurement").

Each pair's two runs meet different moments of the host: a shared state (sd STATE x 0.08 on the
log scale) moves the figure and the probe alike, and each has its own noise besides (0.05 and
0.04). With --tails, the figure also carries a few disturbed pairs (t, 3 df, scale 0.03). Each
check is judged at one look and one figure, alpha 5% over both directions; with --shift S every
pair carries a true change of S (log scale), and the table reads as the rate of catching it.

    PYTHONPATH=. .venv/bin/python scripts/studies/probe_level.py [--sims 1500] [--pairs 40] [--shift 0.02]

With --replay FILE (a scripts/studies/asv_sensitivity.py output whose checks used the probe), each
check's stored per-pair log ratios are judged again: the typical pair's spread without the
probe, with it (the robust slope the harness uses), and with a least-squares slope in its place.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics

import numpy as np

from harness.analyze import paired
from harness.analyze.covariate import MIN_PROBE_PAIRS
from harness.analyze.design import Design


def moment(rng: np.random.Generator, n: int, sd_state: float = 0.08, sd_own: float = 0.04,
           sd_probe: float = 0.04, change: float = 0.0, probe_change: float = 0.0,
           tails: bool = False) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """n pairs: (base, head, (probe base, probe head)), the state shared by figure and probe."""
    state = rng.normal(0.0, sd_state, n)
    d = change + state + rng.normal(0.0, sd_own, n)
    if tails:
        d = d + 0.03 * rng.standard_t(3, n)
    x = probe_change + state + rng.normal(0.0, sd_probe, n)
    base = np.full(n, 5.0)
    return base, base * np.exp(d), (np.full(n, 4.0), 4.0 * np.exp(x))


def rates(rng: np.random.Generator, sims: int, n: int, state: float, tails: bool, shift: float) -> tuple[float, float]:
    """(share of checks called worse or improved with the probe, without it), the same pairs."""
    design = Design(threshold=0.02, alpha=0.05, looks=1, figures=1, floor=0.001)
    hit = plain = 0
    for _ in range(sims):
        b, h, pr = moment(rng, n, sd_state=0.08 * state + 1e-9, sd_own=0.05, change=shift, tails=tails)
        hit += paired.analyze(b, h, design, pr).verdict in ("worse", "improved")
        plain += paired.analyze(b, h, design).verdict in ("worse", "improved")
    return hit / sims, plain / sims


def replay(path: str) -> int:
    """The stored checks' pairs, judged without the probe, with it, and with a least-squares slope."""
    rows = json.loads(open(path, encoding="utf-8").read())["rows"]
    design = Design(threshold=0.10, alpha=0.05, looks=4, figures=3)
    print(f"{'check':<10} {'arm':<15} {'pairs':>5} {'without':>8} {'robust':>7} {'least sq.':>9}")
    ratios: dict[str, list[float]] = {"robust": [], "least squares": []}
    for r in rows:
        for arm, p in (r.get("pairs") or {}).items():
            if "probe_logs" not in p or len(p["logs"]) < MIN_PROBE_PAIRS:
                continue
            d, x = np.asarray(p["logs"]), np.asarray(p["probe_logs"])
            n, ones = d.size, np.ones(d.size)
            without = paired.analyze(ones, np.exp(d), design).spread
            robust = paired.analyze(ones, np.exp(d), design, (ones, np.exp(x))).spread
            xc = x - x.mean()
            ols = float(xc @ (d - d.mean())) / float(xc @ xc)
            widen = math.sqrt((n - 1) / (n - 2) * (1.0 + n * float(x.mean()) ** 2 / float(xc @ xc)))
            lsq = paired.analyze(ones, np.exp(d - ols * x), design).spread * widen
            ratios["robust"].append(robust / without)
            ratios["least squares"].append(lsq / without)
            print(f"{r['head'] + ' ' + str(r['check']):<10} {arm:<15} {n:>5} {without:>8.1%} {robust:>7.1%} {lsq:>9.1%}")
    for name, rs in ratios.items():
        if rs:
            print(f"{name}: spread with / without the probe, median {statistics.median(rs):.2f}, "
                  f"{min(rs):.2f} to {max(rs):.2f} over {len(rs)} checks x arms")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=1500)
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--shift", type=float, default=0.0)
    ap.add_argument("--replay", metavar="FILE", help="judge a stored sensitivity run's pairs again")
    args = ap.parse_args()
    if args.replay:
        return replay(args.replay)
    word = "caught" if args.shift else "false alarms"
    print(f"{args.pairs} pairs, {args.sims} checks, true change {math.expm1(args.shift):+.1%}: {word}")
    print(f"{'state':>6} {'tails':>6} {'with the probe':>15} {'without':>8}")
    for state, tails in ((0.0, False), (0.8, False), (0.8, True)):
        w, wo = rates(np.random.default_rng(9), args.sims, args.pairs, state, tails, args.shift)
        print(f"{state:>6.1f} {str(tails):>6} {w:>15.1%} {wo:>8.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
