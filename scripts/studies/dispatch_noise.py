"""Where does a GPU host's run-to-run noise in classic decode come from: whole slow runs, or
spikes inside runs? Loads a target once, decodes --runs runs of --tokens tokens with the
engine's own pipelined classic loop, and records every token's inter-arrival time. Prints, per
run, the mean and the median per-token time, and over runs the spread (sd) of the log-ratio of
successive runs for both: what one pair of a paired check would see if nothing changed.

Run it as is and under `taskset -c CPUS` to see what pinning the dispatching process does.

    PYTHONPATH=. python3 scripts/studies/dispatch_noise.py --model build/random-8b-4bit --runs 30 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from pathlib import Path

import mlx.core as mx
from mlx_lm.generate import generation_stream
from mlx_lm.models.cache import make_prompt_cache

from specdec.engine import _prefill
from specdec.loading import load_pair


def one_run(model, prompt: mx.array, tokens: int) -> list[float]:
    """Per-token inter-arrival times (ms) of one pipelined classic decode (the engine's loop)."""
    cache = make_prompt_cache(model)
    _prefill(model, cache, prompt)

    def step(y: mx.array) -> mx.array:
        return mx.argmax(model(y[None], cache=cache)[:, -1, :], axis=-1).astype(mx.uint32)

    times, t0 = [], time.perf_counter()
    nxt = step(prompt[-1:])
    mx.async_eval(nxt)
    for i in range(tokens):
        cur = nxt
        if i + 1 < tokens:
            nxt = step(cur)
            mx.async_eval(nxt)
        cur.item()
        t1 = time.perf_counter()
        times.append((t1 - t0) * 1e3)
        t0 = t1
    return times


def spread(xs: list[float]) -> float:
    d = [math.log(b / a) for a, b in zip(xs, xs[1:])]
    return statistics.stdev(d)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--gap-s", type=float, default=0.2, help="idle time between runs (a cooldown)")
    ap.add_argument("--json")
    args = ap.parse_args()
    pair = load_pair(args.model, with_drafter=False)
    prompt = mx.array(pair.tokenizer.encode("def main(argv):\n    " * 20), dtype=mx.uint32)
    with mx.stream(generation_stream):
        for _ in range(2):  # warm-ups: kernels compile on first use
            one_run(pair.target, prompt, args.tokens)
        runs = []
        for _ in range(args.runs):
            time.sleep(args.gap_s)
            runs.append(one_run(pair.target, prompt, args.tokens))
    steady = [r[1:] for r in runs]  # the first token waits for the first forward alone
    means = [statistics.fmean(r) for r in steady]
    medians = [statistics.median(r) for r in steady]
    out = {"affinity": sorted(os.sched_getaffinity(0)), "tokens": args.tokens, "runs": len(runs),
           "mean_ms": means, "median_ms": medians,
           "pair_sd_mean": spread(means), "pair_sd_median": spread(medians),
           "spike_share": statistics.fmean(sum(t > 1.5 * m for t in r) / len(r) for r, m in zip(steady, medians)),
           "spike_ms_share": statistics.fmean(sum(t - m for t in r if t > 1.5 * m) / sum(r) for r, m in zip(steady, medians)),
           "per_token_ms": runs}
    print(f"affinity {len(out['affinity'])} cpus  runs {len(runs)} x {args.tokens} tokens  "
          f"mean ms/token {statistics.median(means):.3f} (min {min(means):.3f}, max {max(means):.3f})  "
          f"median {statistics.median(medians):.3f} (min {min(medians):.3f}, max {max(medians):.3f})  "
          f"pair sd: mean {out['pair_sd_mean']:.2%}, median {out['pair_sd_median']:.2%}  "
          f"spikes (>1.5x median): {out['spike_share']:.1%} of tokens, {out['spike_ms_share']:.1%} of time")
    if args.json:
        Path(args.json).write_text(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
