"""specdec against stock mlx-lm on the embedded pair, and the cost of specdec's diagnostics.

Arms run interleaved in one process, order rotated per repetition, medians of --reps:
  specdec classic (block 1)        vs  mlx-lm generate_step
  specdec block K                  vs  mlx-lm speculative_generate_step(num_draft_tokens=K-1)
  specdec block K, instrument=False (diagnostics off) for the overhead A/B
Every figure is end-to-end wall time of one call (prefill of a short prompt included, for every
engine alike) over --max-tokens tokens. On CPU hosts with OpenBLAS the exactness probe fails, so
specdec's speculative arm runs with SPECDEC_ALLOW_INEXACT=1 (named in the output); mlx-lm has no gate.
The diagnostics' cost is also measured directly: the per-round bookkeeping timed in isolation,
as a share of the measured round. Prints a table, then one JSON line.

    python scripts/reproduce/bench_engine.py --reps 5 --max-tokens 200
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import mlx.core as mx
from mlx_lm.generate import generate_step, speculative_generate_step

import specdec  # noqa: F401  (BLAS preload before mlx)
from specdec.blas import blas_info
from specdec.diagnostics import Diagnostics
from specdec.engine import _count_round, generate
from specdec.loading import load_pair
from specdec.prompts import load_prompts


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--block", type=int, default=3)
    ap.add_argument("--warmups", type=int, default=1)
    args = ap.parse_args()
    os.environ.setdefault("SPECDEC_ALLOW_INEXACT", "1")
    pair = load_pair()
    prompt = load_prompts("code")[0][1]
    ids = pair.tokenizer.encode(prompt)
    n, k = args.max_tokens, args.block

    def sd(block, instrument=True):
        return lambda: generate(pair, ids, block=block, max_tokens=n, ignore_eos=True, instrument=instrument)

    def lm_classic():
        for (_t, _), _i in zip(generate_step(mx.array(ids), pair.target, max_tokens=n), range(n)):
            pass

    def lm_spec():
        for _ in speculative_generate_step(mx.array(ids), pair.target, pair.drafter, num_draft_tokens=k - 1, max_tokens=n):
            pass

    arms = {"specdec classic": sd(1), "mlx-lm generate_step": lm_classic,
            f"specdec block {k}": sd(k), f"mlx-lm speculative K={k}": lm_spec,
            f"specdec block {k} (diagnostics off)": sd(k, instrument=False),
            "specdec classic (diagnostics off)": sd(1, instrument=False)}
    names = list(arms)
    for _ in range(args.warmups):
        for name in names:
            arms[name]()
    samples = {name: [] for name in names}
    for rep in range(args.reps):
        order = names[rep % len(names):] + names[:rep % len(names)]
        for name in order:
            samples[name].append(n / timed(arms[name]))
    # Direct cost of the per-round bookkeeping (clock reads + counters + round log), in isolation.
    spec = generate(pair, ids, block=k, max_tokens=n, ignore_eos=True).diagnostics
    d = Diagnostics(mode="speculative", block_size=k, proposed_by_position=[0] * (k - 1),
                    accepted_by_position=[0] * (k - 1), first_miss_histogram=[0] * k)
    reps = 20000
    t = time.perf_counter()
    for i in range(reps):
        for _ in range(7):
            time.perf_counter()
        _count_round(d, i, [1] * (k - 1), i % k, k - 1, k - 1)
    per_round_us = (time.perf_counter() - t) / reps * 1e6
    round_ms = spec.decode_ms / spec.rounds
    rows = {name: {"median_tok_s": statistics.median(v), "min": min(v), "max": max(v),
                   "spread": (max(v) - min(v)) / statistics.median(v)} for name, v in samples.items()}
    med = {name: r["median_tok_s"] for name, r in rows.items()}
    out = {
        "blas": blas_info()["blas"], "device": str(mx.default_device()), "reps": args.reps, "max_tokens": n,
        "block": k, "overrides": {k_: v for k_, v in os.environ.items() if k_.startswith("SPECDEC_")},
        "arms": rows,
        "specdec_spec_vs_mlx_lm_spec": med[f"specdec block {k}"] / med[f"mlx-lm speculative K={k}"],
        "specdec_classic_vs_mlx_lm_classic": med["specdec classic"] / med["mlx-lm generate_step"],
        "diagnostics_ab_spec": med[f"specdec block {k} (diagnostics off)"] / med[f"specdec block {k}"] - 1,
        "diagnostics_ab_classic": med["specdec classic (diagnostics off)"] / med["specdec classic"] - 1,
        "diagnostics_direct_us_per_round": per_round_us, "round_ms": round_ms,
        "diagnostics_direct_share": per_round_us / 1e3 / round_ms,
        "acceptance_rate": spec.acceptance_rate, "per_step_acceptance": spec.per_step_acceptance,
    }
    print(f"{'arm':40s} {'tok/s median':>12s} {'min-max':>17s} {'spread':>7s}")
    for name, r in rows.items():
        flag = "  may be unstable" if r["spread"] > 0.04 else ""
        print(f"{name:40s} {r['median_tok_s']:12.1f} {r['min']:8.1f}-{r['max']:<8.1f} {r['spread']:6.1%}{flag}")
    print(f"specdec/mlx-lm speculative: {out['specdec_spec_vs_mlx_lm_spec']:.3f}x; classic: "
          f"{out['specdec_classic_vs_mlx_lm_classic']:.3f}x; diagnostics A/B cost: spec "
          f"{out['diagnostics_ab_spec']:+.1%}, classic {out['diagnostics_ab_classic']:+.1%}; direct: "
          f"{per_round_us:.1f} us per round of {round_ms:.2f} ms = {out['diagnostics_direct_share']:.2%}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
