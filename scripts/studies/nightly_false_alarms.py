"""How often would the nightly alert on unchanged code? Simulated weeks of nightly series built
from real sessions of the real suite.

Each real session (a record of `harness run` on the same code) gives every series of the suite
(the figures asv tracks, harness.ci.asvsession.figures_from_record) its per-run samples. A
simulated commit is one real session picked at random, its runs resampled with replacement, so
both the run-to-run and the session-to-session spread of this host are in the series. A history
of --history commits, then --nights nights of one new commit each: after every night the change
points of all series are computed together (harness.analyze.changepoints, as the nightly does) and
every step counts as an alert (all of them, and apart those at the week's own commits: a step in
the history would have been alerted in its own week). Repeated over --weeks simulated weeks.

    for i in 1 2 3 4 5 6; do python -m harness run SUITE --record build/fa/r$i.json; done
    python scripts/studies/nightly_false_alarms.py build/fa/r*.json --weeks 50 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from harness.analyze.changepoints import ALPHA, Point, analyze_series
from harness.ci.asvsession import SuiteFile, arm_specs, figures_from_record
from harness.core.figures import is_exact


def series_of(record: dict) -> dict[str, list[float]]:
    suite = SuiteFile(arms=record["suite"]["arms"],
                      override_prefixes=record["suite"]["settings"].get("override_prefixes", []))
    figs = figures_from_record(record["runs"], arm_specs(suite, environ={}))
    return {f"{fig.name}|{key}": xs for fig in figs.figures() for key, xs in fig.samples.items() if xs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+")
    ap.add_argument("--history", type=int, default=20, help="commits before the week")
    ap.add_argument("--nights", type=int, default=7)
    ap.add_argument("--weeks", type=int, default=50)
    ap.add_argument("--threshold", type=float, default=0.10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--alpha", type=float, default=ALPHA, help="false-discovery rate of one night's analysis")
    ap.add_argument("--json")
    args = ap.parse_args()
    sessions = [series_of(json.loads(Path(p).read_text())) for p in args.records]
    temp = json.loads(Path(args.records[0]).read_text())["suite"]["settings"].get("temp", 0.0)
    names = sorted(set.intersection(*(set(s) for s in sessions)))
    exact = {n for n in names if is_exact(n.split("|", 1)[0], temp)}
    rng = np.random.default_rng(args.seed)
    alerts_per_week, week_alerts, unstable, by_series = [], [], set(), {}
    for _ in range(args.weeks):
        n = args.history + args.nights
        order = [f"c{i:03d}" for i in range(n)]
        picks = rng.integers(0, len(sessions), n)
        data = {name: [Point(order[i], tuple(rng.choice(sessions[picks[i]][name], len(sessions[picks[i]][name]))))
                       for i in range(n)] for name in names}
        seen: set[tuple[str, str]] = set()
        alerts = in_week = 0
        for night in range(args.nights):
            upto = args.history + night + 1
            res = analyze_series({k: v[:upto] for k, v in data.items()}, order[:upto], args.threshold, exact, args.alpha)
            for r in res:
                if r.unstable:
                    unstable.add(r.series)
                for s in r.steps:
                    if (r.series, s.first_after) not in seen:
                        seen.add((r.series, s.first_after))
                        alerts += 1
                        in_week += order.index(s.first_after) >= args.history
                        by_series[r.series] = by_series.get(r.series, 0) + 1
        alerts_per_week.append(alerts)
        week_alerts.append(in_week)
    out = {"argv": sys.argv[1:], "sessions": len(sessions), "series": len(names), "exact_series": len(exact),
           "unstable_in_some_week": sorted(unstable), "weeks": args.weeks, "nights_per_week": args.nights,
           "history_commits": args.history, "threshold": args.threshold, "fdr": args.alpha,
           "alerts_total": int(sum(alerts_per_week)), "weeks_with_an_alert": int(sum(a > 0 for a in alerts_per_week)),
           "alerts_by_series": by_series,
           # A nightly that ran the weeks before would have alerted a step in the history then:
           # what this week adds is a step at one of its own commits.
           "alerts_at_the_weeks_commits": int(sum(week_alerts)),
           "weeks_with_an_alert_at_their_commits": int(sum(a > 0 for a in week_alerts))}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
