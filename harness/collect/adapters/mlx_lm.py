"""Stock mlx-lm in process: its declaration and its adapter."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.collect.engines import EngineOutput, RunRequest, run_in_process
from harness.collect.models import weights_problem
from harness.core.declare import EngineDecl

# Stock mlx-lm reports no phases and has no profile mode; MLX_ variables change how it runs.
DECLARATION = EngineDecl(
    name="mlx-lm", adapter="mlx-lm", override_prefixes=("MLX_",),
    numerics="MLX (Metal / CUDA; CPU BLAS on a CPU device)")


def check_inputs(pairing: Any) -> str | None:
    """A truncated or corrupt weights file, said before the session rather than by every run."""
    return weights_problem({"target": pairing.target_dir(), "drafter": pairing.drafter_dir()})


class MlxLmAdapter:
    """Stock mlx-lm: `generate_step` (classic) or `speculative_generate_step` (K-1 drafts).

    Timing: the harness prefills the prompt (all but its last token) into the KV caches
    itself and evaluates them, then starts the clock; decode_ms runs from handing the last
    prompt token to the generator until the last token reaches the host (mlx-lm yields
    Python ints, so each yield is a sync). It therefore includes the first decode step and
    excludes prefill and model loading, as the schema's decode_ms does. mlx-lm pipelines one step
    ahead, so a step computed after the last token may still be in flight: not counted.
    There is no round split (no phase_ms); acceptance comes from `from_draft`.
    """

    def __init__(self) -> None:
        # (model path, sorted environment): the loaded (model, tokenizer)
        self._models: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}

    def _load(self, path: Path, env: Mapping[str, str]) -> Any:
        key = (str(path), tuple(sorted(env.items())))
        if key not in self._models:
            from mlx_lm import load
            self._models[key] = load(str(path))
        return self._models[key]

    def run(self, req: RunRequest) -> EngineOutput:
        # Stock mlx-lm has no view of its overrides: the result carries the harness's.
        return run_in_process(req, lambda overrides: {**self._generate(req), "overrides": dict(overrides)})

    def _generate(self, req: RunRequest) -> dict[str, Any]:
        import mlx.core as mx
        import mlx_lm
        from mlx_lm.generate import generate_step, speculative_generate_step
        from mlx_lm.models.cache import make_prompt_cache
        from mlx_lm.sample_utils import make_sampler

        arm, s, pairing = req.arm, req.settings, req.pairing
        model, tok = self._load(pairing.target_dir(), arm.env)
        draft = None
        if not arm.classic:
            dd = pairing.drafter_dir()
            if dd is None:
                raise ValueError(f"arm {arm.name!r}: block {arm.block} needs a drafter")
            draft, _ = self._load(dd, arm.env)
        ids = tok.encode(req.prompt.text)
        if not ids:
            raise ValueError("the prompt encodes to no tokens")
        mx.random.seed(s.seed)
        sampler = make_sampler(temp=s.temp)
        caches = [make_prompt_cache(model)] + ([make_prompt_cache(draft)] if draft is not None else [])
        models = [model] + ([draft] if draft is not None else [])

        # MLX's peak counter over this generation; what is in use now is resident (weights).
        mx.synchronize()
        mx.reset_peak_memory()
        resident = int(mx.get_active_memory())
        t0 = time.perf_counter()
        prompt = mx.array(ids, mx.uint32)
        _prefill(models, caches, prompt)
        t1 = time.perf_counter()

        last = prompt[-1:]
        if draft is None:
            stream = ((t, False) for t, _ in generate_step(
                last, model, max_tokens=s.max_tokens, sampler=sampler, prompt_cache=caches[0]))
        else:
            stream = ((t, d) for t, _, d in speculative_generate_step(
                last, model, draft, num_draft_tokens=arm.block - 1, max_tokens=s.max_tokens,
                sampler=sampler, prompt_cache=caches[0] + caches[1]))
        eos = set() if s.ignore_eos else set(getattr(tok, "eos_token_ids", None) or [])
        out_ids, flags, t2 = _drain(stream, eos, t1)
        text = tok.decode(out_ids)
        decode_ms = (t2 - t1) * 1000.0
        n = len(out_ids)
        diag = _mlx_lm_diagnostics(flags, arm.block, s.max_tokens)
        diag.update({
            "prompt_tokens": len(ids), "generated_tokens": n,
            "prefill_ms": (t1 - t0) * 1000.0, "decode_ms": decode_ms,
            "closure_error_ms": None,
            "decode_tokens_per_s": n / (decode_ms / 1000.0) if decode_ms > 0 else None,
            "ms_per_token": decode_ms / n if n else None,
            "profile": False, "profile_syncs": 0,
            "peak_memory_bytes": int(mx.get_peak_memory()), "resident_memory_bytes": resident,
            "timing": "harness prefill excluded; first decode step to last token on host",
        })
        return _result(req, text, out_ids, diag, mx, mlx_lm)


def _prefill(models: list[Any], caches: list[Any], prompt: Any) -> None:
    """Every prompt token but the last into each model's cache, chunked like mlx-lm's own."""
    import mlx.core as mx
    for m, c in zip(models, caches):
        rest = prompt[:-1]
        while rest.size > 0:
            m(rest[:512][None], cache=c)
            mx.eval([x.state for x in c])
            rest = rest[512:]


def _drain(stream: Any, eos: set[int], t1: float) -> tuple[list[int], list[bool], float]:
    """The tokens up to EOS, whether each came from the draft, and when the last one arrived."""
    out_ids: list[int] = []
    flags: list[bool] = []
    t2 = t1
    for t, from_draft in stream:
        t = int(t)
        if t in eos:
            break
        out_ids.append(t)
        flags.append(bool(from_draft))
        t2 = time.perf_counter()
    return out_ids, flags, t2


def _result(req: RunRequest, text: str, out_ids: list[int], diag: dict[str, Any], mx: Any,
            mlx_lm: Any) -> dict[str, Any]:
    """The result in the engine contract's shape."""
    arm, s, pairing = req.arm, req.settings, req.pairing
    return {
        "text": text, "token_ids": out_ids,
        "text_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "arm": {"mode": "classic" if arm.classic else "speculative", "block": arm.block,
                "temp": s.temp, "seed": s.seed, "max_tokens": s.max_tokens,
                "ignore_eos": s.ignore_eos,
                "target": str(pairing.target_dir()),
                "drafter": None if arm.classic else str(pairing.drafter_dir())},
        # Stock mlx-lm has no exactness probe: speculative decoding always engages.
        "gate": {"outcome": "not_applicable", "engaged": not arm.classic,
                 "reading": "stock mlx-lm has no exactness probe", "differing_bytes": [],
                 "logit_bytes": None, "message": "no gate in this engine"},
        "engine": {"name": "mlx-lm", "version": mlx_lm.__version__,
                   "mlx": getattr(mx, "__version__", "unknown"), "mlx_lm": mlx_lm.__version__,
                   "device": str(mx.default_device()), "blas": "unknown"},
        "diagnostics": diag,
    }


def _mlx_lm_diagnostics(flags: list[bool], block: int, max_tokens: int) -> dict[str, Any]:
    """Rebuild rounds from `from_draft`: a round is its accepted drafts then one target token.

    A round cut short by max_tokens ends after its accepted drafts, with no target token;
    such a round proposed only the drafts that fit (mlx-lm drafts min(K-1, remaining)).
    """
    if block == 1:
        return {"mode": "classic", "block_size": 1, "rounds": 0, "proposed": 0,
                "accepted": 0, "acceptance_rate": None, "per_step_tested": 0,
                "per_step_acceptance": None, "emitted_per_verify": 1.0 if flags else None,
                "rounds_log": []}
    k = block - 1
    rounds: list[tuple[int, int, int]] = []   # (offset, proposed, accepted)
    acc, start = 0, 0
    for f in flags:
        if f:
            acc += 1
        else:
            rounds.append((start, min(k, max_tokens - start), acc))
            start, acc = start + acc + 1, 0
    if acc:
        rounds.append((start, min(k, max_tokens - start), acc))
    proposed = sum(r[1] for r in rounds)
    accepted = sum(r[2] for r in rounds)
    tested = sum(a + (1 if a < p else 0) for _, p, a in rounds)
    by_pos_p = [0] * k
    by_pos_a = [0] * k
    first_miss = [0] * (k + 1)
    for _, p, a in rounds:
        for i in range(p):
            by_pos_p[i] += 1 if i <= a else 0   # positions tested up to the first miss
            by_pos_a[i] += 1 if i < a else 0
        first_miss[a if a < p else k] += 1
    return {
        "mode": "speculative", "block_size": block, "rounds": len(rounds),
        "proposed": proposed, "accepted": accepted,
        "acceptance_rate": accepted / proposed if proposed else None,
        "per_step_tested": tested,
        "per_step_acceptance": accepted / tested if tested else None,
        "emitted_per_verify": len(flags) / len(rounds) if rounds else None,
        "zero_accept_rounds": sum(1 for _, p, a in rounds if a == 0),
        "partial_accept_rounds": sum(1 for _, p, a in rounds if 0 < a < p),
        "full_accept_rounds": sum(1 for _, p, a in rounds if a == p),
        "proposed_by_position": by_pos_p, "accepted_by_position": by_pos_a,
        "acceptance_by_position": [a / p if p else None for a, p in zip(by_pos_a, by_pos_p)],
        "first_miss_histogram": first_miss,
        "rounds_log": [{"offset": o, "proposed": p, "accepted": a} for o, p, a in rounds],
    }


ADAPTER = MlxLmAdapter
