"""What the contention watch costs the run it watches, and how many samples it gets, with the
watch in a thread of the harness's process against the watch in its own process.

Two workloads, interleaved run by run over the three ways (no watch, thread, process):
- `loop`: a fixed amount of pure-Python work that never gives the GIL back of its own accord
  (the worst case for a thread watch); the figure is its wall time.
- `specdec`: the embedded pair's classic decode, in process, as `harness run` does it; the
  figure is the engine's own decode ms per token.

For each workload and way: the median figure, its spread (min-max over median), its ratio to
"no watch", and the watch's samples per run (min, median). One JSON line at the end.

`python scripts/studies/watch_overhead.py [--reps 15] [--tokens 128] [--loop-s 0.3]`
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.collect.host import watcher  # noqa: E402
from harness.collect.host.load import ForeignCpuSampler  # noqa: E402
from harness.collect.host.quiet import ContentionWatch  # noqa: E402

WAYS = ("none", "thread", "process")


def loop_work(n: int) -> float:
    t0 = time.perf_counter()
    x = 0
    for i in range(n):
        x += i
    return time.perf_counter() - t0


def calibrate(seconds: float) -> int:
    n = 100_000
    while loop_work(n) < seconds / 4:
        n *= 2
    return int(n * seconds / loop_work(n))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--loop-s", type=float, default=0.3)
    args = ap.parse_args()

    import specdec  # noqa: F401  (its BLAS preload comes before mlx.core, as in a session)
    from specdec.engine import generate
    from specdec.loading import load_pair
    pair = load_pair(None, None)
    prompt = "def main(argv):\n    "
    generate(pair, prompt, block=1, max_tokens=args.tokens, ignore_eos=True)   # warm-up
    n_loop = calibrate(args.loop_s)

    sampler = ForeignCpuSampler()
    sampler.prime()
    proc = watcher.Watcher(lambda: sampler)
    predicted = {"loop": args.loop_s, "specdec": None}
    figures = {(w, k): [] for w in WAYS for k in predicted}
    samples = {(w, k): [] for w in WAYS for k in predicted}

    def run(kind: str) -> float:
        if kind == "loop":
            return loop_work(n_loop) * 1e3
        return generate(pair, prompt, block=1, max_tokens=args.tokens, ignore_eos=True).diagnostics.decode_ms / args.tokens

    try:
        for rep in range(args.reps):
            order = WAYS if rep % 2 == 0 else tuple(reversed(WAYS))
            for kind in predicted:
                for way in order:
                    pred = predicted[kind] or 0.01
                    if way == "none":
                        ctx = nullcontext()
                    elif way == "thread":
                        ctx = ContentionWatch(interval_s=0.25, predicted_s=pred, sampler=sampler)
                    else:
                        ctx = proc.watch(15.0, 0.25, pred)
                    t0 = time.perf_counter()
                    with ctx as w:
                        fig = run(kind)
                    if kind == "specdec" and rep == 0:
                        predicted[kind] = time.perf_counter() - t0
                    figures[(way, kind)].append(fig)
                    if w is not None:
                        samples[(way, kind)].append(w.result()["samples"])
                    time.sleep(0.05)
    finally:
        proc.close()

    out = {}
    print(f"{'workload':9} {'watch':8} {'median':>10} {'spread':>7} {'vs none':>8} {'samples min/med':>16}")
    for kind in predicted:
        base = statistics.median(figures[("none", kind)])
        for way in WAYS:
            xs = figures[(way, kind)]
            med = statistics.median(xs)
            spread = (max(xs) - min(xs)) / med
            ss = samples[(way, kind)]
            unit = "ms" if kind == "loop" else "ms/tok"
            s_txt = f"{min(ss)}/{statistics.median(ss):g}" if ss else "-"
            print(f"{kind:9} {way:8} {med:8.3f} {unit:6} {spread:6.1%} {med / base:8.3f} {s_txt:>16}")
            out[f"{kind}/{way}"] = {"median": round(med, 4), "spread": round(spread, 4),
                                    "ratio_to_none": round(med / base, 4),
                                    "samples_min": min(ss) if ss else None,
                                    "samples_median": statistics.median(ss) if ss else None}
    print(json.dumps({"reps": args.reps, "tokens": args.tokens, "loop_s": args.loop_s, **out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
