"""False alarms and power of the paired verdict when worker processes differ, with and without
worker generations (suite `restart_s`; harness.analyze.estimators.generations).

Each simulated check has N pairs in G generations, as equal in size as N allows. A pair's log
ratio is shift + u_g + e: u_g the generation's per-process effect, normal with sd TAU (the two
sides' processes of that generation differ by it for their whole life), e the pair's own noise
(sd SD, Student t with DF degrees of freedom scaled to that sd, or normal; with --rho, an AR(1)
series of it, successive pairs alike as on a GPU host). Every check is judged by the
real verdict function twice: told each pair's generation, and not told (as a check with one
worker per side is judged, its whole process effect a single u). One look, one figure:

    PYTHONPATH=. .venv/bin/python scripts/studies/generations_level.py --pairs 340 --generations 4 \\
        --sd 0.15 --tau 0 0.01 0.02 0.04 --shift 0 0.03 --sims 400

prints, for each TAU and shift, the share of checks called worse or improved (a false alarm when
the shift is 0), unchanged, and inconclusive, and the median smallest detectable change.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import numpy as np

from harness.analyze import paired
from harness.analyze.design import Design


def one(rng: np.random.Generator, n: int, g: int, sd: float, tau: float, shift: float, df: float,
        design: Design, rho: float = 0.0) -> dict[str, paired.Paired]:
    blocks = np.repeat(np.arange(g), -(-n // g))[:n]
    if df > 0:
        e = rng.standard_t(df, n) * sd / np.sqrt(df / (df - 2.0))
    else:
        e = rng.normal(0.0, sd, n)
    if rho > 0.0:   # AR(1) with the same marginal sd
        for i in range(1, n):
            e[i] = rho * e[i - 1] + np.sqrt(1.0 - rho * rho) * e[i]
    # Without restarts the whole check is one pair of processes: one effect for all of it.
    u_blocks = rng.normal(0.0, tau, g)[blocks]
    u_one = rng.normal(0.0, tau)
    base = np.exp(rng.normal(0.0, 0.05, n))        # the base's own level does not matter
    return {"generations": paired.analyze(base, base * np.exp(shift + u_blocks + e), design, None, blocks.tolist()),
            "one worker": paired.analyze(base, base * np.exp(shift + u_one + e), design)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=320)
    p.add_argument("--generations", type=int, default=4)
    p.add_argument("--sd", type=float, default=0.15, help="per-pair log-ratio sd")
    p.add_argument("--tau", type=float, nargs="+", default=[0.0, 0.01, 0.02, 0.04],
                   help="sd of the per-process effect")
    p.add_argument("--shift", type=float, nargs="+", default=[0.0, 0.03], help="true log change")
    p.add_argument("--df", type=float, default=5.0, help="Student t noise, > 2 (0: normal)")
    p.add_argument("--rho", type=float, default=0.0, help="lag-1 autocorrelation of the pairs' noise, in [0, 1)")
    p.add_argument("--threshold", type=float, default=0.02)
    p.add_argument("--floor", type=float, default=0.01)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--sims", type=int, default=400)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", help="write the table here too")
    a = p.parse_args(argv)
    if a.generations < 1 or a.pairs < 2 * a.generations:
        print("generations_level: need --generations >= 1 and --pairs >= 2 x generations", file=sys.stderr)
        return 2
    if not (a.df == 0 or a.df > 2) or not 0.0 <= a.rho < 1.0:
        print("generations_level: need --df 0 or above 2 (a finite sd), and --rho in [0, 1)", file=sys.stderr)
        return 2
    design = Design(threshold=a.threshold, alpha=a.alpha, looks=1, figures=1, floor=a.floor)
    rng = np.random.default_rng(a.seed)
    rows = []
    print(f"{a.pairs} pairs in {a.generations} generations, pair sd {a.sd:.0%} (t{a.df:g}, lag-1 {a.rho:g}), threshold "
          f"{a.threshold:.0%}, floor {a.floor:.0%}, alpha {a.alpha:.0%}, {a.sims} checks each")
    print(f"{'tau':>6} {'shift':>6}  {'judged':<12} {'worse/impr.':>11} {'unchanged':>9} {'inconcl.':>9} "
          f"{'det. (median)':>13} {'gens used':>9}")
    for tau in a.tau:
        for shift in a.shift:
            res: dict[str, list[paired.Paired]] = {"generations": [], "one worker": []}
            for _ in range(a.sims):
                for k, r in one(rng, a.pairs, a.generations, a.sd, tau, shift, a.df, design, a.rho).items():
                    res[k].append(r)
            for k, rs in res.items():
                moved = sum(r.verdict in ("worse", "improved") for r in rs) / len(rs)
                row = {"tau": tau, "shift": shift, "judged": k, "worse_or_improved": moved,
                       "unchanged": sum(r.verdict == "unchanged" for r in rs) / len(rs),
                       "inconclusive": sum(r.verdict == "inconclusive" for r in rs) / len(rs),
                       "detectable_median": statistics.median(r.detectable for r in rs),
                       "generations_used": sum(bool(r.generations and r.generations.get("used")) for r in rs) / len(rs)}
                rows.append(row)
                print(f"{tau:>6.1%} {shift:>+6.1%}  {k:<12} {moved:>11.1%} {row['unchanged']:>9.1%} "
                      f"{row['inconclusive']:>9.1%} {row['detectable_median']:>13.2%} {row['generations_used']:>9.0%}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"argv": sys.argv[1:] if argv is None else argv, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
