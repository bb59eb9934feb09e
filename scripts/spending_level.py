"""The false-alarm level and power of a whole sequential check, through the harness's own code:
`figures` gated figures judged together (paired.judge_family, Benjamini-Hochberg) at up to
`looks` looks spent on alpha-spending boundaries (harness.analyze.spending), sampling stopped by
harness.analyze.sequential under a time budget, on a simulated clock (one round a second).

Each round gives every figure one pair whose log ratio is `shift` (the first figure only) plus
normal noise of sd `--sd`, the figures' noise correlated `--rho`. No floor (a change of any size
counts), so the level measured is the boundaries', not the floor's.

    PYTHONPATH=. .venv/bin/python scripts/spending_level.py [--rho 0.0] [--sims 3000] [--shift 0.0]

Prints how often any figure was called worse or improved (the family-wise false-alarm rate when
shift is 0; with a shift, how often the first figure was called worse), then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from harness.analyze import paired, sequential


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def one_check(rng: np.random.Generator, figures: int, rho: float, sd: float, shift: float,
              budget_s: float, looks: int, threshold: float) -> sequential.Outcome:
    clock = _Clock()
    base: list[list[float]] = [[] for _ in range(figures)]
    head: list[list[float]] = [[] for _ in range(figures)]
    design = paired.Design(threshold=threshold, alpha=0.05, looks=looks, figures=figures, floor=1e-9)
    cov = np.full((figures, figures), rho) + np.eye(figures) * (1.0 - rho)

    def do_round(_: int) -> None:
        e = rng.multivariate_normal(np.zeros(figures), cov) * sd
        for f in range(figures):
            base[f].append(1.0)
            head[f].append(math.exp(e[f] + (shift if f == 0 else 0.0)))
        clock.t += 1.0

    def analyze(times: tuple[float, ...], sizes: tuple[float, ...]) -> dict[str, paired.Paired]:
        res = paired.judge_family(list(zip(base, head)), design.at_looks(times, sizes))
        return {str(i): r for i, r in enumerate(res)}

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
    ap.add_argument("--sims", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    hits, rounds = 0, []
    for _ in range(args.sims):
        out = one_check(rng, args.figures, args.rho, args.sd, args.shift, args.budget_s, args.looks, args.threshold)
        verdicts = [v["verdict"] for v in out.final.values()]
        hits += (verdicts[0] == "worse") if args.shift else any(v in ("worse", "improved") for v in verdicts)
        rounds.append(out.rounds)
    rate = hits / args.sims
    what = "first figure called worse" if args.shift else "any figure called worse or improved"
    print(f"{what}: {rate:.2%} of {args.sims} checks (+- {math.sqrt(rate * (1 - rate) / args.sims):.2%}), "
          f"mean rounds {float(np.mean(rounds)):.1f}")
    print(json.dumps({**vars(args), "rate": rate, "mean_rounds": float(np.mean(rounds))}))


if __name__ == "__main__":
    main()
