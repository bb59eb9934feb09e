"""The round loop: classic decode and speculative decode, timed at phase boundaries.

A token generator, a timing layer and a printer are kept apart as in mlx-lm: this module
produces tokens and diagnostics; `cli.py` prints them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.generate import generation_stream
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

import specdec
from specdec import blas, overrides
from specdec.diagnostics import Counts, Diagnostics, RoundLog
from specdec.drafter import Drafter, DraftModelDrafter
from specdec.errors import SpecdecError
from specdec.loading import Pair, parameter_bytes
from specdec.mtp import MTPDrafter, target_parts
from specdec.probe import GateDecision, gate

PREFILL_CHUNK = 512


@dataclass
class GenerationResult:
    text: str
    token_ids: list[int]
    arm: dict
    gate: GateDecision
    overrides: dict
    engine: dict
    diagnostics: Diagnostics

    def to_dict(self) -> dict:
        return {"text": self.text, "token_ids": self.token_ids,
                "text_sha256": hashlib.sha256(self.text.encode()).hexdigest(),
                "arm": self.arm, "gate": self.gate.to_dict(), "overrides": self.overrides,
                "engine": self.engine, "diagnostics": self.diagnostics.to_dict()}


def engine_info(attention: dict | None = None) -> dict:
    import mlx_lm
    out = {"name": "specdec", "version": specdec.__version__, "mlx": mx.__version__,
           "mlx_lm": mlx_lm.__version__, "device": str(mx.default_device())}
    if mx.default_device() == mx.cpu:  # a CPU BLAS only decides numerics on the CPU device
        out["blas"] = blas.blas_info()["blas"]
    if attention:
        out["attention"] = attention
    return out


# Verify shapes (target id, positions T, KV length before the forward) this process has run:
# a round whose shape is new here is a first use (a backend may build a kernel plan per shape).
_SEEN_SHAPES: set[tuple[int, int, int]] = set()


class _Sampler:
    """Greedy at temp 0; otherwise categorical from a seeded key stream (same seed, same draws)."""

    def __init__(self, temp: float, seed: int):
        self.temp = temp
        self.key = mx.random.key(seed)

    def next_key(self) -> mx.array:
        self.key, sub = mx.random.split(self.key)
        return sub

    def __call__(self, logits: mx.array) -> tuple[mx.array, mx.array | None]:
        if self.temp == 0:
            return mx.argmax(logits, axis=-1).astype(mx.uint32), None
        scaled = logits.astype(mx.float32) / self.temp
        tok = mx.random.categorical(scaled, key=self.next_key()).astype(mx.uint32)
        return tok, mx.softmax(scaled, axis=-1)


def _prefill(model, cache, ids: mx.array, counts: Counts, hidden: bool = False) -> mx.array | None:
    """All but the last prompt token (the first decode forward feeds the last one); with
    `hidden`, the target's final hidden states over them ([1, L-1, d]) for an MTP drafter."""
    forward = target_parts(model)[2] if hidden else model
    parts = []
    for start in range(0, ids.size - 1, PREFILL_CHUNK):
        chunk = ids[None, start:min(start + PREFILL_CHUNK, ids.size - 1)]
        out = forward(chunk, cache=cache)
        counts.target_forwards += 1
        counts.target_tokens += chunk.size
        mx.eval([c.state for c in cache] + ([out] if hidden else []))
        counts.host_syncs += 1
        if hidden:
            parts.append(out)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else mx.concatenate(parts, axis=1)


def _encode(pair: Pair, prompt: str | list[int]) -> list[int]:
    if isinstance(prompt, str):
        if not prompt.strip():
            raise SpecdecError("the prompt is empty: give --prompt TEXT or --prompt-file with text in it")
        return list(pair.tokenizer.encode(prompt))
    if not prompt:
        raise SpecdecError("the prompt has no tokens")
    return list(prompt)


def generate(pair: Pair, prompt: str | list[int], block: int = 3, max_tokens: int = 64,
             temp: float = 0.0, seed: int = 0, ignore_eos: bool = False,
             instrument: bool = True) -> GenerationResult:
    """Decode `max_tokens` after `prompt`: speculative at block K when a drafter is loaded, K >= 2
    and the gate engages; classic otherwise. Overrides are read from the environment now.

    instrument=False skips the per-round clock reads, counters and log (decode_ms and the token
    count remain): it exists so the diagnostics' own overhead can be measured against it."""
    if block < 1:
        raise SpecdecError(f"block size must be at least 1 (got {block}); 1 is classic decode")
    if max_tokens < 1:
        raise SpecdecError(f"max tokens must be at least 1 (got {max_tokens})")
    if temp < 0:
        raise SpecdecError(f"temperature must be >= 0 (got {temp})")
    ids = _encode(pair, prompt)
    env = overrides.in_force()
    settings = overrides.read()
    profile, work = settings.profile, settings.inject_work
    speculative = block >= 2 and pair.drafter is not None
    decision = GateDecision("not_applicable", False, "no probe: classic decode requested",
                            message="classic decode (block 1 or no drafter): no exactness probe")
    if speculative:
        decision = gate(pair.target, ids, block, pair.probe_readings, settings)
        speculative = decision.engaged
    sampler = _Sampler(temp, seed)
    if work not in pair.injected:
        pair.injected[work] = _InjectedWork(pair.target, work)
    inject = pair.injected[work]
    eos = set() if ignore_eos else pair.eos_ids
    diag = Diagnostics(mode="speculative" if speculative else "classic", block_size=block if speculative else 1,
                       prompt_tokens=len(ids), profile=profile, probe_ms=decision.probe_ms)
    # Memory: MLX's peak counter from here (the probe above is once per pair and block, not this
    # generation's cost); what is in use now is the resident part (weights, caches).
    mx.synchronize()
    mx.reset_peak_memory()
    diag.resident_memory_bytes = int(mx.get_active_memory())
    counts = Counts()
    with mx.stream(generation_stream):
        if speculative:
            out = _speculative(pair, ids, block, max_tokens, sampler, eos, diag, profile, inject, counts, instrument)
        else:
            out = _classic(pair, ids, max_tokens, sampler, eos, diag, inject, counts, instrument)
    diag.peak_memory_bytes = int(mx.get_peak_memory())
    diag.model_memory_bytes = parameter_bytes(pair.target) + (parameter_bytes(pair.drafter) if speculative else 0)
    arm = {"mode": diag.mode, "requested_mode": "speculative" if block >= 2 and pair.drafter is not None else "classic",
           "block": block, "temp": temp, "seed": seed, "max_tokens": max_tokens, "ignore_eos": ignore_eos,
           "target": str(pair.target_dir), "drafter": str(pair.drafter_dir) if pair.drafter_dir else None,
           "drafter_quantization": pair.drafter_quantization or None}
    if speculative and pair.drafter_kind:
        arm["drafter_kind"] = pair.drafter_kind
        if pair.drafter_borrows:
            arm["drafter_borrows"] = pair.drafter_borrows
    return GenerationResult(text=pair.tokenizer.decode(out), token_ids=out, arm=arm, gate=decision,
                            overrides=env, engine=engine_info(pair.attention), diagnostics=diag)


def _no_clock() -> float:
    return 0.0


class _InjectedWork:
    """Test-only fault SPECDEC_INJECT_WORK=F: adds F of a target decode forward's work (its kernel
    launches and its device work) to every one (classic step, verify forward), evaluated at the
    sync the step already has. Credit n*F - extra after n forwards of this pair in this process,
    across generations; each whole unit runs one extra target forward, output discarded. The
    extra work is the same layers and LM head on the same tokens, not attention over the cached
    context (no KV cache): slightly less than F of a forward at long contexts."""

    def __init__(self, model, fraction: float):
        self.model, self.fraction = model, fraction
        self.forwards = self.extra = 0

    def __call__(self, out: mx.array, inp: mx.array) -> mx.array:
        """`out` (the real forward's output on `inp`), made to depend on any extra forwards due."""
        if not self.fraction:
            return out
        self.forwards += 1
        due = math.floor(self.forwards * self.fraction + 1e-9) - self.extra
        if due <= 0:
            return out
        self.extra += due
        return mx.depends(out, [self.model(inp) for _ in range(due)])


def _decode_counters(counts: Counts, at_decode: Counts) -> dict[str, int]:
    """The decode's counts by name (the standard ones and this engine's own)."""
    return counts.since(at_decode)


def _classic(pair: Pair, ids: list[int], max_tokens: int, sampler: _Sampler, eos: set[int],
             diag: Diagnostics, inject: _InjectedWork, counts: Counts, instrument: bool = True) -> list[int]:
    target, cache = pair.target, make_prompt_cache(pair.target)
    prompt = mx.array(ids, dtype=mx.uint32)
    t = time.perf_counter()
    _prefill(target, cache, prompt, counts)
    start = time.perf_counter()
    diag.prefill_ms = (start - t) * 1e3
    at_decode = dataclasses.replace(counts)

    def step(y: mx.array) -> mx.array:
        logits = inject(target(y[None], cache=cache), y[None])
        counts.target_forwards += 1
        counts.target_tokens += 1
        return sampler(logits[:, -1, :])[0]

    clock = time.perf_counter if instrument else _no_clock
    out: list[int] = []
    step_ms = resid_ms = 0.0
    t0 = start if instrument else 0.0
    nxt = step(prompt[-1:])
    mx.async_eval(nxt)
    while True:
        cur = nxt
        if len(out) + 1 < max_tokens:  # issue the next step before reading this one (pipelined)
            nxt = step(cur)
            mx.async_eval(nxt)
        tok = cur.item()
        counts.host_syncs += 1
        t1 = clock()
        step_ms += t1 - t0
        done = tok in eos
        if not done:
            out.append(tok)
        t0 = clock()
        resid_ms += t0 - t1
        if done or len(out) >= max_tokens:
            break
    diag.decode_ms = ((t0 if instrument else time.perf_counter()) - start) * 1e3
    diag.generated_tokens = len(out)
    diag.phase_ms = {"target_step": step_ms * 1e3, "residual": resid_ms * 1e3}
    diag.counters = _decode_counters(counts, at_decode)
    return out


def _speculative(pair: Pair, ids: list[int], block: int, max_tokens: int, sampler: _Sampler,
                 eos: set[int], diag: Diagnostics, profile: bool, inject: _InjectedWork,
                 counts: Counts, instrument: bool = True) -> list[int]:
    target, tcache = pair.target, make_prompt_cache(pair.target)
    drafter: Drafter = (MTPDrafter(pair.drafter, target, profile and instrument, counts) if pair.drafter_kind == "mtp"
                        else DraftModelDrafter(pair.drafter, counts))
    if drafter.wants_hidden:
        _, lm_head, hidden_forward = target_parts(target)
    prompt = mx.array(ids, dtype=mx.uint32)
    t = time.perf_counter()
    hidden = _prefill(target, tcache, prompt, counts, hidden=drafter.wants_hidden)
    drafter.prefill(prompt, hidden, sampler)
    start = time.perf_counter()
    diag.prefill_ms = (start - t) * 1e3
    at_decode = dataclasses.replace(counts)
    k1 = block - 1
    diag.proposed_by_position = [0] * k1
    diag.accepted_by_position = [0] * k1
    diag.first_miss_histogram = [0] * block
    ph = dict.fromkeys(("draft_block", "verify_forward", "accept_hook", "verify_finalize", "residual"), 0.0)
    sync_s = 0.0

    def sync(arrays) -> None:
        # Profile mode only: settle the stage's device work so its time is its own.
        nonlocal sync_s
        s = time.perf_counter()
        mx.eval(arrays)
        counts.host_syncs += 1
        sync_s += time.perf_counter() - s
        diag.profile_syncs += 1

    clock = time.perf_counter if instrument else _no_clock
    out: list[int] = []
    y = prompt[-1:]
    t0 = start if instrument else 0.0
    tid = id(target)
    while len(out) < max_tokens:
        nd = min(k1, max_tokens - len(out) - 1)
        # A drafter that times its own stages starts from this phase's clock reading.
        own = {"started": t0} if profile and instrument and drafter.profiles_itself else {}
        drafts, q = drafter.draft_block(y, nd, sampler, **own)
        nd = drafts.size  # an MTP head with no seed yet (1-token prompt) drafts nothing
        if profile and nd and not drafter.profiles_itself:
            sync([drafts] + ([q] if q is not None else []))
        t1 = clock()
        if own:
            drafter.phase_end(t1)
        inp = mx.concatenate([y, drafts]) if nd else y
        kv_len = tcache[0].offset
        hidden = None
        if drafter.wants_hidden:
            hidden = hidden_forward(inp[None], cache=tcache)
            logits = inject(lm_head(hidden), inp[None])[0]
        else:
            logits = inject(target(inp[None], cache=tcache), inp[None])[0]
        counts.target_forwards += 1
        counts.target_tokens += inp.size
        if sampler.temp == 0:
            verified = mx.argmax(logits, axis=-1).astype(mx.uint32)
            mx.eval(verified, drafts)
            counts.host_syncs += 1
            v_list, d_list = verified.tolist(), drafts.tolist()  # no sync: evaluated above
            accept_mask = None
        else:
            verified, accept_mask = _rejection_sample(logits, drafts, q, sampler)
            mx.eval(verified, accept_mask, drafts)
            counts.host_syncs += 1
            # No sync: evaluated above.
            v_list, d_list, accept_mask = verified.tolist(), drafts.tolist(), accept_mask.tolist()
        t2 = clock()
        n = 0
        if accept_mask is None:
            while n < nd and d_list[n] == v_list[n]:
                n += 1
        else:
            while n < nd and accept_mask[n]:
                n += 1
        emitted = d_list[:n] + [v_list[n]]
        t3 = clock()
        drafter.accept(n, nd, d_list, hidden, emitted=emitted, sample=sampler,
                       **({"started": t3} if own else {}))
        if profile and not drafter.profiles_itself:
            sync(drafter.state())
        t4 = clock()
        if own:
            drafter.phase_end(t4)
        trim_prompt_cache(tcache, nd - n)  # keep y and the accepted drafts
        t5 = clock()
        if instrument:
            shape = (tid, nd + 1, kv_len)
            _count_round(diag, len(out), d_list, n, nd, k1,
                         verify_ms=(t2 - t1) * 1e3, kv_len=kv_len, first_use=shape not in _SEEN_SHAPES)
            _SEEN_SHAPES.add(shape)
        done = False
        for tok in emitted:
            if tok in eos:
                done = True
                break
            out.append(tok)
        y = mx.array([emitted[-1]], dtype=mx.uint32)
        counts.host_uploads += 1
        t6 = clock()
        ph["draft_block"] += t1 - t0
        ph["verify_forward"] += t2 - t1
        ph["accept_hook"] += t4 - t3
        ph["verify_finalize"] += t5 - t4
        ph["residual"] += (t3 - t2) + (t6 - t5)
        t0 = t6
        if done:
            break
    diag.decode_ms = ((t0 if instrument else time.perf_counter()) - start) * 1e3
    diag.generated_tokens = len(out)
    if not instrument:
        diag.rounds = -1  # not counted
    diag.phase_ms = {k: v * 1e3 for k, v in ph.items()}
    diag.profile_sync_ms = sync_s * 1e3
    if isinstance(drafter, MTPDrafter):
        diag.drafter_split = drafter.split_dict()
        n, ms = drafter.profile_syncs()
        diag.profile_syncs += n
        diag.profile_sync_ms += ms
    diag.counters = _decode_counters(counts, at_decode)
    return out


def _count_round(diag: Diagnostics, offset: int, drafted: list[int], n: int, nd: int, k1: int,
                 verify_ms: float | None = None, kv_len: int | None = None, first_use: bool | None = None) -> None:
    diag.rounds_log.append(RoundLog(offset=offset, drafted=drafted, accepted=n, verify_ms=verify_ms,
                                    kv_len=kv_len, first_use=first_use))
    diag.rounds += 1
    if not nd:
        return
    diag.proposed += nd
    diag.accepted += n
    diag.per_step_tested += n + (1 if n < nd else 0)
    for i in range(nd):
        diag.proposed_by_position[i] += 1
        diag.accepted_by_position[i] += i < n
    diag.first_miss_histogram[n if n < nd else k1] += 1
    if n == 0:
        diag.zero_accept_rounds += 1
    elif n == nd:
        diag.full_accept_rounds += 1
    else:
        diag.partial_accept_rounds += 1


def _rejection_sample(logits: mx.array, drafts: mx.array, q: mx.array | None,
                      sampler: _Sampler) -> tuple[mx.array, mx.array]:
    """Speculative sampling (Leviathan et al.): accept draft i with prob min(1, p/q); at the first
    rejection sample from max(p - q, 0); after a full accept sample the bonus from p. All lazy."""
    p = mx.softmax(logits.astype(mx.float32) / sampler.temp, axis=-1)  # [nd+1, V]
    nd = drafts.size
    bonus = mx.random.categorical(mx.log(p[nd:] + 1e-30), key=sampler.next_key()).astype(mx.uint32)
    if nd == 0:
        return bonus, mx.array([], dtype=mx.bool_)
    idx = drafts.astype(mx.int32)[:, None]
    p_d = mx.take_along_axis(p[:nd], idx, axis=-1)[:, 0]
    q_d = mx.take_along_axis(q, idx, axis=-1)[:, 0]
    u = mx.random.uniform(shape=(nd,), key=sampler.next_key())
    accept = u < mx.minimum(1.0, p_d / mx.maximum(q_d, 1e-30))
    resid = mx.maximum(p[:nd] - q, 0.0)
    resid = mx.where(resid.sum(-1, keepdims=True) > 0, resid, p[:nd])
    corrected = mx.random.categorical(mx.log(resid + 1e-30), key=sampler.next_key()).astype(mx.uint32)
    return mx.concatenate([corrected, bonus]), accept
