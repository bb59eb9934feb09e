"""The exactness probe and the gate that decides from it.

The probe asks the question speculative decoding's temperature-0 exactness rests on: does the
target's K-wide verify forward produce the same logits, byte for byte, as K single-token steps
over the same tokens? Where it does not (e.g. a kernel path that reduces in another order),
speculative output can differ from classic decode for reasons that are not the drafter's.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

from specdec import overrides


@dataclass
class GateDecision:
    outcome: str                     # passed | declined | overridden | not_applicable
    engaged: bool                    # speculative decoding runs
    reading: str = ""                # the probe's own sentence
    differing_bytes: list[int] = field(default_factory=list)  # per verify position
    logit_bytes: int = 0             # bytes per position's logits
    block: int = 0
    probe_ms: float = 0.0            # 0 when this pair's reading for the block was reused
    message: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _logit_bytes(row: mx.array) -> np.ndarray:
    # Raw bytes of the logits in the model's own dtype (bf16 has no numpy dtype, uint8 does).
    return np.array(row.view(mx.uint8)).reshape(-1)


def probe(target, prompt_ids: list[int], block: int, force_inexact: bool = False) -> tuple[list[int], int]:
    """Differing logit bytes per position between one block of `block` tokens and the chain."""
    cache = make_prompt_cache(target)
    ctx = mx.array(prompt_ids, dtype=mx.uint32)
    if ctx.size > 1:
        target(ctx[None, :-1], cache=cache)
    fed = [prompt_ids[-1]]
    chain = []
    for i in range(block):
        logits = target(mx.array([fed[-1]], dtype=mx.uint32)[None], cache=cache)[0, -1]
        mx.eval(logits)
        chain.append(logits)
        if i < block - 1:
            fed.append(int(mx.argmax(logits).item()))
    trim_prompt_cache(cache, block)
    blk = target(mx.array(fed, dtype=mx.uint32)[None], cache=cache)[0]
    if force_inexact:
        # Test-only: one ulp-scale nudge at position 0 makes a host that passes look like one that fails.
        blk = mx.concatenate([blk[:1] * (1 + 1e-3), blk[1:]])
    mx.eval(blk)
    diffs = []
    for i in range(block):
        a, b = _logit_bytes(chain[i]), _logit_bytes(blk[i])
        diffs.append(int((a != b).sum()))
    return diffs, int(_logit_bytes(chain[0]).size)


def gate(target, prompt_ids: list[int], block: int, readings: dict | None = None,
         settings: overrides.Settings | None = None) -> GateDecision:
    """Probe (or reuse this pair's reading for the block), then engage (passed), decline to
    classic, or engage under SPECDEC_ALLOW_INEXACT. settings: the generation's overrides (read
    from the environment when not given)."""
    settings = settings or overrides.read()
    t0 = time.perf_counter()
    key = (block, settings.force_probe == "fail")
    cached = readings is not None and key in readings
    if cached:
        diffs, nbytes = readings[key]
    else:
        diffs, nbytes = probe(target, prompt_ids, block, key[1])
        if readings is not None:
            readings[key] = (diffs, nbytes)
    ms = 0.0 if cached else (time.perf_counter() - t0) * 1e3
    bad = [i for i, d in enumerate(diffs) if d]
    if settings.force_probe == "pass":
        # Test-only: the engaged path on every host; the reading says it was forced and what it measured.
        measured = f"; measured: {sum(1 for d in diffs if d)} of {block} positions differ" if bad else ""
        reading = (f"verify block of {block} positions read as byte-identical: forced by "
                   f"SPECDEC_FORCE_PROBE=pass (test-only){measured}")
        return GateDecision("passed", True, reading, [0] * block, nbytes, block, ms,
                            f"exactness probe forced to pass: {reading}")
    if not bad:
        reading = (f"verify block of {block} positions is byte-identical to the single-token chain "
                   f"({nbytes} logit bytes per position)")
        return GateDecision("passed", True, reading, diffs, nbytes, block, ms, f"exactness probe passed: {reading}")
    pos = bad[0]
    reading = f"verify block position {pos} differs from the single-token chain in {diffs[pos]} of {nbytes} logit bytes"
    if settings.allow_inexact:
        return GateDecision("overridden", True, reading, diffs, nbytes, block, ms,
                            f"exactness probe FAILED but SPECDEC_ALLOW_INEXACT is set: {reading}")
    return GateDecision("declined", False, reading, diffs, nbytes, block, ms,
                        f"exactness probe FAILED, declining to classic decode: {reading} "
                        f"(SPECDEC_ALLOW_INEXACT=1 engages anyway; not a shipping configuration)")
