"""Run the engine on a large random-init pair (8B-shape 4-bit target, 1B-shape drafter).

Random weights make acceptance meaningless; they are fine for cost, bandwidth and the
exactness probe. Used on a CUDA host through MLX's CUDA build:

    python scripts/reproduce/gpu_random_pair.py --out result.json
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.llama import Model, ModelArgs
from mlx_lm.utils import load_tokenizer

import specdec  # noqa: F401  (BLAS preload before mlx)
from specdec.engine import generate
from specdec.loading import EMBEDDED_TARGET, Pair, parameter_count, quantize_drafter
from specdec.scaling import verify_forward_cost_scaling

SHAPES = {
    "8b": dict(hidden_size=4096, num_hidden_layers=32, intermediate_size=14336, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256),
    "1b": dict(hidden_size=2048, num_hidden_layers=16, intermediate_size=8192, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256),
    # A smoke-test size for a CPU host.
    "tiny-t": dict(hidden_size=256, num_hidden_layers=2, intermediate_size=512, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=4096),
    "tiny-d": dict(hidden_size=128, num_hidden_layers=1, intermediate_size=256, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=4096),
}


def random_model(shape: str) -> Model:
    args = ModelArgs(model_type="llama", rms_norm_eps=1e-5, rope_theta=500000.0,
                     tie_word_embeddings=False, **SHAPES[shape])
    model = Model(args)
    model.set_dtype(mx.float16)
    return model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="gpu_random_pair.json")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shapes", default="8b,1b", help="target,drafter shape names")
    args = ap.parse_args()
    mx.random.seed(0)
    tshape, dshape = args.shapes.split(",")
    target = random_model(tshape)
    nn.quantize(target, group_size=64, bits=4)  # the target as a lab would ship it: 4-bit g64
    mx.eval(target.parameters())
    drafter = random_model(dshape)
    mx.eval(drafter.parameters())
    report: dict = {"device": str(mx.default_device()), "mlx": mx.__version__,
                    "target_params": parameter_count(target), "drafter_params_dense": parameter_count(drafter)}
    # The embedded tokenizer supplies prompt ids; ids past its vocabulary decode to nothing.
    tok = load_tokenizer(EMBEDDED_TARGET)
    pair = Pair(target=target, tokenizer=tok, target_dir=Path("random-init-8b-4bit"), drafter=drafter,
                drafter_dir=Path("random-init-1b"))
    pair.drafter_quantization = quantize_drafter(drafter, EMBEDDED_TARGET)
    prompt = list(range(1, 65))
    # Warm-up of every path measured below, at the measured length: MLX's CUDA backend compiles
    # kernels on first use of a shape (the KV cache grows in steps of 256 positions), and a
    # declined block-3 arm never touches the T=3 verify or the drafter.
    import os
    generate(pair, prompt, block=1, max_tokens=args.max_tokens, ignore_eos=True)
    for profile in ("0", "1"):
        os.environ.update(SPECDEC_ALLOW_INEXACT="1", SPECDEC_PROFILE=profile)
        generate(pair, prompt, block=3, max_tokens=args.max_tokens, ignore_eos=True)
    del os.environ["SPECDEC_ALLOW_INEXACT"], os.environ["SPECDEC_PROFILE"]
    runs = []
    for rep in range(args.repeats):
        for block in ((1, 3) if rep % 2 == 0 else (3, 1)):  # interleaved, order rotated
            r = generate(pair, prompt, block=block, max_tokens=args.max_tokens, ignore_eos=True).to_dict()
            d = r["diagnostics"]
            runs.append({"block": block, "repetition": rep, "mode": d["mode"], "gate": r["gate"]["outcome"],
                         "decode_tokens_per_s": d["decode_tokens_per_s"], "ms_per_token": d["ms_per_token"],
                         "acceptance_rate": d["acceptance_rate"], "phase_ms": d["phase_ms"], "rounds": d["rounds"]})
            print(json.dumps(runs[-1]), flush=True)
    report["gate_default"] = generate(pair, prompt, block=3, max_tokens=8, ignore_eos=True).to_dict()["gate"]
    report["runs"] = runs
    # The overridden block-3 arm, unprofiled and profiled, interleaved with the order rotated, so
    # that the profile mode's cost is read between warm twins rather than across a cold start.
    keys = ("decode_tokens_per_s", "ms_per_token", "acceptance_rate", "rounds", "phase_ms",
            "profile_syncs", "profile_sync_ms")
    forced = {"0": [], "1": []}
    for rep in range(args.repeats):
        for profile in (("0", "1") if rep % 2 == 0 else ("1", "0")):
            os.environ.update(SPECDEC_ALLOW_INEXACT="1", SPECDEC_PROFILE=profile)
            r = generate(pair, prompt, block=3, max_tokens=args.max_tokens, ignore_eos=True).to_dict()
            forced[profile].append({k: r["diagnostics"][k] for k in keys} | {"gate": r["gate"]["outcome"]})
            print(json.dumps({"profile": profile, "repetition": rep,
                              "decode_tokens_per_s": r["diagnostics"]["decode_tokens_per_s"]}), flush=True)
    del os.environ["SPECDEC_ALLOW_INEXACT"], os.environ["SPECDEC_PROFILE"]
    report["block3_overridden_runs"] = forced["0"]
    report["block3_overridden_profiled_runs"] = forced["1"]
    # The same pair through stock mlx-lm, and the drafter alone, for comparison.
    from mlx_lm.generate import generate_step, speculative_generate_step
    ids = mx.array(prompt)
    for name, fn in (("mlx_lm_speculative_k3", lambda: speculative_generate_step(
            ids, target, drafter, num_draft_tokens=2, max_tokens=args.max_tokens)),
                     ("mlx_lm_drafter_classic", lambda: generate_step(ids, drafter, max_tokens=args.max_tokens)),
                     ("mlx_lm_target_classic", lambda: generate_step(ids, target, max_tokens=args.max_tokens))):
        rates = []
        for _ in zip(fn(), range(16)):  # warm-up
            pass
        for _ in range(2):
            t0 = time.perf_counter()
            n = sum(1 for _ in zip(fn(), range(args.max_tokens)))
            rates.append(n / (time.perf_counter() - t0))
        report[name] = {"tok_s_runs": rates, "what": "end-to-end wall, prefill of 64 tokens included"}
        print(name, rates, flush=True)
    report["scaling"] = verify_forward_cost_scaling(target, context_tokens=512)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"device": report["device"], "gate_default": report["gate_default"],
                      "block3_overridden_tok_s": [r["decode_tokens_per_s"] for r in forced["0"]],
                      "block3_profiled_tok_s": [r["decode_tokens_per_s"] for r in forced["1"]]}))


if __name__ == "__main__":
    main()
