"""Does the dispatch probe keep the paired verdict's false-alarm level, and what does it buy? A
simulation through harness.analyze.paired.analyze, with and without the probe on the same pairs
(docs/statistics.md, "The dispatch probe").

Each pair's two runs meet different moments of the host: a shared state (sd STATE x 0.08 on the
log scale) moves the figure and the probe alike, and each has its own noise besides (0.05 and
0.04). With --tails, the figure also carries a few disturbed pairs (t, 3 df, scale 0.03). Each
check is judged at one look and one figure, alpha 5% over both directions; with --shift S every
pair carries a true change of S (log scale), and the table reads as the rate of catching it.

    PYTHONPATH=. .venv/bin/python scripts/probe_level.py [--sims 1500] [--pairs 40] [--shift 0.02]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from harness.analyze import paired


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
    design = paired.Design(threshold=0.02, alpha=0.05, looks=1, figures=1, floor=0.001)
    hit = plain = 0
    for _ in range(sims):
        b, h, pr = moment(rng, n, sd_state=0.08 * state + 1e-9, sd_own=0.05, change=shift, tails=tails)
        hit += paired.analyze(b, h, design, pr).verdict in ("worse", "improved")
        plain += paired.analyze(b, h, design).verdict in ("worse", "improved")
    return hit / sims, plain / sims


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=1500)
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--shift", type=float, default=0.0)
    args = ap.parse_args()
    word = "caught" if args.shift else "false alarms"
    print(f"{args.pairs} pairs, {args.sims} checks, true change {math.expm1(args.shift):+.1%}: {word}")
    print(f"{'state':>6} {'tails':>6} {'with the probe':>15} {'without':>8}")
    for state, tails in ((0.0, False), (0.8, False), (0.8, True)):
        w, wo = rates(np.random.default_rng(9), args.sims, args.pairs, state, tails, args.shift)
        print(f"{state:>6.1f} {str(tails):>6} {w:>15.1%} {wo:>8.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
