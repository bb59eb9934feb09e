"""How the target's forward cost grows with the number of positions T it verifies at once."""
from __future__ import annotations

import statistics
import time

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache


def verify_forward_cost_scaling(target, context_tokens: int = 512, widths=(1, 2, 3, 4, 8),
                                repeats: int = 7, warmup: int = 2, seed: int = 0) -> dict:
    """Median ms of one target forward of T positions after a context of `context_tokens`.

    Each timed forward is evaluated (one sync) and then trimmed from the KV cache, so every
    width sees the same context. Token ids are random (cost does not depend on them).
    """
    vocab = target.args.vocab_size if hasattr(target, "args") else 1000
    mx.random.seed(seed)
    cache = make_prompt_cache(target)
    ctx = mx.random.randint(0, vocab, (1, context_tokens)).astype(mx.uint32)
    mx.eval(target(ctx, cache=cache))
    rows = []
    for t in widths:
        x = mx.random.randint(0, vocab, (1, t)).astype(mx.uint32)
        samples = []
        for i in range(warmup + repeats):
            s = time.perf_counter()
            mx.eval(target(x, cache=cache))
            ms = (time.perf_counter() - s) * 1e3
            trim_prompt_cache(cache, t)
            if i >= warmup:
                samples.append(ms)
        rows.append({"T": t, "median_ms": statistics.median(samples), "min_ms": min(samples),
                     "max_ms": max(samples), "repeats": repeats})
    base = rows[0]["median_ms"]
    for r in rows:
        r["vs_T1"] = r["median_ms"] / base
    return {"context_tokens": context_tokens, "device": str(mx.default_device()), "widths": rows,
            "what": "median wall ms of one evaluated target forward of T positions after the context"}
