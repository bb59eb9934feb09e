"""How the target's forward cost grows with the number of positions T it verifies at once,
at a KV length seen before (warm) and at new ones (cold), and the host's dispatch floor."""
from __future__ import annotations

import statistics
import time

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache


def _timed(fn) -> float:
    s = time.perf_counter()
    fn()
    return (time.perf_counter() - s) * 1e3


def _summary(samples: list[float]) -> dict:
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples)}


def verify_forward_cost_scaling(target, context_tokens: int = 512, widths=(1, 2, 3, 4, 8),
                                repeats: int = 7, warmup: int = 2, seed: int = 0) -> dict:
    """Median ms of one evaluated target forward of T positions after the context.

    Warm: every repeat at the same KV length (`context_tokens`), after `warmup` untimed ones, each
    forward trimmed from the cache afterwards. Cold: every repeat at a KV length no forward of that
    width has run at in this measurement (the context grows by one untimed token first), which is
    what a decode meets each round; a backend that builds a kernel plan per shape pays it here.
    Token ids are random (cost does not depend on them)."""
    vocab = target.args.vocab_size if hasattr(target, "args") else 1000
    mx.random.seed(seed)
    cache = make_prompt_cache(target)
    ctx = mx.random.randint(0, vocab, (1, context_tokens)).astype(mx.uint32)
    mx.eval(target(ctx, cache=cache))

    def forward(x: mx.array) -> None:
        mx.eval(target(x, cache=cache))

    rows = []
    for t in widths:
        x = mx.random.randint(0, vocab, (1, t)).astype(mx.uint32)
        mx.eval(x)
        samples = []
        for i in range(warmup + repeats):
            ms = _timed(lambda x=x: forward(x))
            trim_prompt_cache(cache, t)
            if i >= warmup:
                samples.append(ms)
        rows.append({"T": t, **_summary(samples), "repeats": repeats})
    # Cold, after warm: the KV lengths grow past every warm one, and each width's grow in turn.
    grown = 0
    for row in rows:
        t = row["T"]
        x = mx.random.randint(0, vocab, (1, t)).astype(mx.uint32)
        one = mx.random.randint(0, vocab, (1, 1)).astype(mx.uint32)
        mx.eval(x, one)
        samples = []
        for _ in range(repeats):
            forward(one)          # a new KV length (untimed)
            grown += 1
            samples.append(_timed(lambda x=x: forward(x)))
            trim_prompt_cache(cache, t)
        cold = _summary(samples)
        row.update({f"cold_{k}": v for k, v in cold.items()})
        row["cold_vs_warm"] = cold["median_ms"] / row["median_ms"] if row["median_ms"] else None
    trim_prompt_cache(cache, grown)
    base = rows[0]["median_ms"]
    for r in rows:
        r["vs_T1"] = r["median_ms"] / base
    return {"context_tokens": context_tokens, "device": str(mx.default_device()), "widths": rows,
            "dispatch": dispatch_floor(target, cache, repeats=max(repeats, 7)),
            "what": "median wall ms of one evaluated target forward of T positions after the context: warm at "
                    "a KV length run before, cold at a new KV length each time"}


def dispatch_floor(target, cache, repeats: int = 7, warmup: int = 2) -> dict:
    """What a step costs before bandwidth: one trivial evaluated op (a launch and a sync), the
    host's time to build and issue one T=1 step without waiting (issue_ms), and one decoder
    layer's evaluated T=1 forward at the cache's context, against the whole evaluated T=1 step."""
    inner = getattr(target, "model", None)
    layers = list(getattr(inner, "layers", []) or [])
    out: dict = {"layers": len(layers) or None, "repeats": repeats}
    one = mx.array([1.0])
    mx.eval(one)
    out["empty_ms"] = statistics.median(
        [_timed(lambda: mx.eval(one + 1)) for _ in range(warmup + repeats)][warmup:])
    vocab = target.args.vocab_size if hasattr(target, "args") else 1000
    x = mx.random.randint(0, vocab, (1, 1)).astype(mx.uint32)
    mx.eval(x)

    def step() -> None:
        mx.eval(target(x, cache=cache))
        trim_prompt_cache(cache, 1)
    out["step_ms"] = statistics.median([_timed(step) for _ in range(warmup + repeats)][warmup:])
    # The host's own time to build one T=1 step's graph and issue its kernels, not waiting for
    # them: a pipelined decode step cannot be faster than this.
    issue = []
    for _ in range(warmup + repeats):
        s = time.perf_counter()
        y = target(x, cache=cache)
        mx.async_eval(y)
        issue.append((time.perf_counter() - s) * 1e3)
        mx.eval(y)
        trim_prompt_cache(cache, 1)
    out["issue_ms"] = statistics.median(issue[warmup:])
    if layers and hasattr(inner, "embed_tokens"):
        h = inner.embed_tokens(x)
        mx.eval(h)
        layer, c0 = layers[0], cache[0]

        def one_layer() -> None:
            mx.eval(layer(h, None, cache=c0))
            c0.trim(1)
        out["layer_ms"] = statistics.median([_timed(one_layer) for _ in range(warmup + repeats)][warmup:])
    return out
