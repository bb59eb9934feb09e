"""How many pairs, and how much measuring time, would a paired check need at each run length?

Reads a record of interleaved arms that differ only in run length (e.g.
scripts/suites/noise-probe-random-8b.toml) and prints, per arm: the spread (sd) of the
log-ratio of successive measured runs of that arm (what one pair of a paired check sees when
nothing changed), the wall time per run, the cooldown the suite's rule adds, and the pairs and
measuring seconds needed for the smallest detectable change (harness.analyze.paired, same design as
the check) to reach --threshold.

    PYTHONPATH=. python3 scripts/pair_noise.py RECORD.json --threshold 0.02 --looks 4
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from scipy import stats as sps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("record")
    ap.add_argument("--threshold", type=float, default=0.02)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--looks", type=int, default=4)
    ap.add_argument("--power", type=float, default=0.80)
    ap.add_argument("--ratio", type=float, default=0.25, help="cooldown ratio of the host profile")
    ap.add_argument("--floor-s", type=float, default=0.05, help="cooldown floor of the host profile")
    ap.add_argument("--json", help="write the table as JSON here")
    args = ap.parse_args()
    runs = json.loads(Path(args.record).read_text())["runs"]
    q = sps.norm.ppf(1 - args.alpha / args.looks / 2) + sps.norm.ppf(args.power)
    se_needed = math.log1p(args.threshold) / q
    rows = []
    for arm in sorted({r["arm"] for r in runs}):
        rs = [r for r in runs if r["arm"] == arm and not r.get("warmup") and r["status"] == "ok"]
        ms = [r["ms_per_token"] for r in rs]
        diffs = [math.log(b / a) for a, b in zip(ms, ms[1:])]
        if len(diffs) < 3:
            continue
        sd = statistics.stdev(diffs)
        wall = statistics.median(r["wall_s"] for r in rs)
        pair_s = 2 * (wall + max(args.floor_s, args.ratio * wall))
        pairs = math.ceil((sd / se_needed) ** 2)
        rows.append({"arm": arm, "runs": len(rs), "tokens": rs[0]["generated_tokens"],
                     "ms_per_token_median": statistics.median(ms), "pair_log_sd": sd,
                     "run_wall_s": wall, "pair_s": pair_s, "pairs_needed": pairs,
                     "measuring_s_needed": pairs * pair_s})
    for r in rows:
        print(f"{r['arm']:<14} runs {r['runs']:>3}  tokens {r['tokens']:>4}  ms/token {r['ms_per_token_median']:.3f}  "
              f"pair sd {r['pair_log_sd']:.2%}  run {r['run_wall_s']:.2f} s  pair {r['pair_s']:.2f} s  "
              f"pairs for {args.threshold:.0%}: {r['pairs_needed']}  measuring {r['measuring_s_needed']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
