"""How many pairs, and how much measuring time, would a paired check need at this run length?

Reads a record of two or more identical arms interleaved (e.g.
scripts/reproduce/suites/noise-probe-random-8b.toml, once per max_tokens and cooldown rule: see
scripts/reproduce/h200_paired.sh) and prints:

- per arm, the spread (sd) of the log-ratio of successive measured runs of that arm;
- over the first two arms, the spread of the log-ratio of the two arms' runs of one repetition
  (adjacent in time, the arm that goes first rotating): exactly what one pair of a paired
  check sees when nothing changed, so this is the figure the pairs needed are computed from;
- the time one pair takes, as measured in the record: the two runs' wall times, their
  cooldowns and quiet waits (not a modelled cooldown rule);
- the pairs and the measuring seconds needed for the check's smallest detectable change
  (harness.analyze.paired.plan: the pairs judged as the check would judge them, at the last of
  --looks looks' share of alpha, --power) to reach --threshold, and the smallest detectable
  change that --minutes of measuring would give at this spread.

    PYTHONPATH=. python3 scripts/studies/pair_noise.py RECORD.json --threshold 0.02 --looks 4
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from harness.analyze import paired
from harness.analyze.design import Design, detectable_change


def spread(logs: list[float]) -> float | None:
    return statistics.stdev(logs) if len(logs) >= 3 else None


def pair_time_s(runs: list[dict]) -> float:
    """Median of one run's wall time plus the waits before it, times two."""
    return 2 * statistics.median(r["wall_s"] + (r.get("cooldown_s") or 0.0) + (r.get("quiet_wait_s") or 0.0)
                                 for r in runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("record")
    ap.add_argument("--threshold", type=float, default=0.02)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--looks", type=int, default=4)
    ap.add_argument("--power", type=float, default=0.80)
    ap.add_argument("--minutes", type=float, default=8.0, help="measuring time to report the detectable change for")
    ap.add_argument("--json", help="write the result as JSON here")
    args = ap.parse_args()
    data = json.loads(Path(args.record).read_text())
    settings = (data.get("suite") or {}).get("settings") or {}
    runs = [r for r in data["runs"] if not r.get("warmup") and r["status"] == "ok"]
    # Resolved at the last look, at that look's share of alpha, judged as the check would judge
    # these pairs (their location, spread and serial allowance: harness.analyze.paired).
    design = Design(threshold=args.threshold, alpha=args.alpha, looks=args.looks, figures=1, power=args.power)
    arms = list(dict.fromkeys(r["arm"] for r in runs))
    per_arm = []
    for arm in arms:
        ms = [r["ms_per_token"] for r in runs if r["arm"] == arm]
        per_arm.append({"arm": arm, "runs": len(ms), "ms_per_token_median": statistics.median(ms),
                        "successive_log_sd": spread([math.log(b / a) for a, b in zip(ms, ms[1:])])})
    out: dict = {"record": args.record, "max_tokens": settings.get("max_tokens"),
                 "cooldown": {k: settings.get(k) for k in ("cooldown_s", "cooldown_source", "cooldown_ratio",
                                                           "cooldown_cap_s")},
                 "threshold": args.threshold, "looks": args.looks, "arms": per_arm,
                 "run_wall_s": statistics.median(r["wall_s"] for r in runs) if runs else None,
                 "pair_s": pair_time_s(runs) if runs else None}
    if len(arms) >= 2:
        by_rep: dict[tuple, dict[str, float]] = {}
        for r in runs:
            by_rep.setdefault((r["prompt"], r["repetition"]), {})[r["arm"]] = r["ms_per_token"]
        logs = [math.log(v[arms[1]] / v[arms[0]]) for v in by_rep.values() if arms[0] in v and arms[1] in v]
        sd = spread(logs)
        out.update(pairs=len(logs), pair_log_sd=sd, pair_log_mean=statistics.fmean(logs) if logs else None)
        if sd:
            p = paired.analyze([1.0] * len(logs), [math.exp(x) for x in logs], design)
            pairs = paired.plan(p, design)
            in_time = max(3, int(args.minutes * 60 / out["pair_s"]))
            share = 1.0 - paired.TAIL_SHARE if p.location == "huber" else 1.0
            out.update(location=p.location, spread=p.spread, inflation=p.inflation,
                       pairs_needed=pairs, measuring_s_needed=None if pairs is None else pairs * out["pair_s"],
                       minutes=args.minutes, pairs_in_minutes=in_time,
                       detectable_in_minutes=detectable_change(p.spread * p.inflation, in_time, design, share))
    for a in per_arm:
        s = a["successive_log_sd"]
        print(f"{a['arm']:<14} runs {a['runs']:>3}  ms/token {a['ms_per_token_median']:.3f}  "
              f"successive-run sd {'-' if s is None else f'{s:.2%}'}")
    if out.get("pair_log_sd"):
        print(f"max_tokens {out['max_tokens']}  run {out['run_wall_s']:.3f} s  pair {out['pair_s']:.3f} s "
              f"(waits included)  between-arm pair sd {out['pair_log_sd']:.2%} over {out['pairs']} pairs  "
              f"pairs for {args.threshold:.0%}: {out['pairs_needed'] or 'over 100000'} "
              f"({'-' if out['measuring_s_needed'] is None else format(out['measuring_s_needed'], '.0f')} s)  "
              f"in {args.minutes:g} min: {out['pairs_in_minutes']} pairs, detectable {out['detectable_in_minutes']:.2%}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0 if out.get("pair_log_sd") else 1


if __name__ == "__main__":
    sys.exit(main())
