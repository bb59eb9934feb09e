"""The false-alarm level and power of a whole sequential check, through the harness's own code:
`figures` gated figures judged together (paired.judge_family, Benjamini-Hochberg) at up to
`looks` looks spent on alpha-spending boundaries (harness.analyze.spending), sampling stopped by
harness.analyze.sequential under a time budget, on a simulated clock (one round a second).

Each round gives every figure one pair whose log ratio is `shift` (the first figure only) plus
noise of sd `--sd` (normal, or Student t with `--df` degrees of freedom scaled to that sd: the
host's heavy tails), the figures' noise correlated `--rho` (normal only). `--floor` is the
smallest change called worse or improved (default: none, so the level measured is the
boundaries', not the floor's).

    PYTHONPATH=. .venv/bin/python scripts/studies/spending_level.py [--rho 0.0] [--sims 3000] [--shift 0.0]

Prints how often any figure was called worse or improved (the family-wise false-alarm rate when
shift is 0; with a shift, how often the first figure was called worse), the first figure's
verdicts, how many checks stopped resolved and their mean rounds, then one JSON line.

It also runs against a commit from before alpha spending (2026-12-06, when a look was passed
its index and the looks split alpha evenly), to compare the two rules on the same simulated
checks: from a worktree of that commit, PYTHONPATH=. python PATH/TO/scripts/studies/spending_level.py ...
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace

import numpy as np

from harness.analyze import paired, sequential

try:
    from harness.analyze.design import Design
except ImportError:   # a commit from before the design moved out of paired.py (2026-12-07)
    Design = paired.Design  # type: ignore[misc]


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def one_check(rng: np.random.Generator, figures: int, rho: float, sd: float, shift: float, budget_s: float,
              looks: int, threshold: float, floor: float, df: float | None) -> sequential.Outcome:
    clock = _Clock()
    base: list[list[float]] = [[] for _ in range(figures)]
    head: list[list[float]] = [[] for _ in range(figures)]
    design = Design(threshold=threshold, alpha=0.05, looks=looks, figures=figures, floor=floor)
    cov = np.full((figures, figures), rho) + np.eye(figures) * (1.0 - rho)

    def do_round(_: int) -> None:
        if df is None:
            e = rng.multivariate_normal(np.zeros(figures), cov) * sd
        else:
            e = rng.standard_t(df, size=figures) * sd / math.sqrt(df / (df - 2.0))
        for f in range(figures):
            base[f].append(1.0)
            head[f].append(math.exp(e[f] + (shift if f == 0 else 0.0)))
        clock.t += 1.0

    def judged(d: Design) -> dict[str, paired.Paired]:
        return {str(i): r for i, r in enumerate(paired.judge_family(list(zip(base, head)), d))}

    if hasattr(Design, "at_looks"):
        analyze = lambda times, sizes: judged(design.at_looks(times, sizes))  # noqa: E731
    else:   # a commit from before alpha spending: a look was its index
        analyze = lambda look: judged(replace(design, look=look))  # noqa: E731
    return sequential.run(5, 100_000, budget_s, looks, do_round, analyze, started=0.0, clock=clock)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--figures", type=int, default=3)
    ap.add_argument("--rho", type=float, default=0.0, help="correlation of the figures' noise")
    ap.add_argument("--sd", type=float, default=0.3, help="sd of a pair's log ratio")
    ap.add_argument("--shift", type=float, default=0.0, help="true log change of the first figure")
    ap.add_argument("--budget-s", type=float, default=80.0, help="rounds the budget buys (one a second)")
    ap.add_argument("--looks", type=int, default=4)
    ap.add_argument("--threshold", type=float, default=0.10)
    ap.add_argument("--floor", type=float, default=1e-9, help="smallest change called worse or improved")
    ap.add_argument("--df", type=float, default=None, help="Student t noise with these degrees of freedom")
    ap.add_argument("--sims", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    hits, rounds, resolved = 0, [], 0
    first = {v: 0 for v in paired.VERDICTS}
    for _ in range(args.sims):
        out = one_check(rng, args.figures, args.rho, args.sd, args.shift, args.budget_s, args.looks,
                        args.threshold, args.floor, args.df)
        verdicts = [v["verdict"] for v in out.final.values()]
        hits += (verdicts[0] == "worse") if args.shift else any(v in ("worse", "improved") for v in verdicts)
        first[verdicts[0]] += 1
        rounds.append(out.rounds)
        resolved += out.stopped == "resolved"
    rate = hits / args.sims
    what = "first figure called worse" if args.shift else "any figure called worse or improved"
    rule = "alpha spending" if hasattr(Design, "at_looks") else "even split (before 2026-12-06)"
    print(f"{rule}: {what}: {rate:.2%} of {args.sims} checks (+- {math.sqrt(rate * (1 - rate) / args.sims):.2%}); "
          f"first figure {first}; {resolved} stopped resolved, mean rounds {float(np.mean(rounds)):.1f}")
    print(json.dumps({**vars(args), "rule": rule, "rate": rate, "first_figure": first, "resolved": resolved,
                      "mean_rounds": float(np.mean(rounds))}))


if __name__ == "__main__":
    main()
