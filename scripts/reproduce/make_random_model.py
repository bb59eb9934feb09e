"""Write a random-init Llama model directory that any suite can point at (mlx-lm's layout:
config.json, model.safetensors, the embedded pair's tokenizer files).

Random weights make acceptance meaningless; they are fine for cost, bandwidth and the paired
commit check. The 8B shape at 4 bits (group 64) is what the GPU measurements use:

    python scripts/reproduce/make_random_model.py --shape 8b --bits 4 --out build/random-8b-4bit
    python scripts/reproduce/make_random_model.py --shape 8b --mtp --out build/random-8b-mtp   # an MTP head for it
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.utils import save_model

import specdec  # noqa: F401  (BLAS preload before mlx)
from specdec.loading import EMBEDDED_TARGET

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_random_pair import SHAPES, random_model  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="8b", choices=sorted(SHAPES))
    ap.add_argument("--bits", type=int, default=4, help="0 keeps fp16 weights")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mtp", action="store_true",
                    help="an MTP head (specdec/mtp.py) for a target of this shape, fp16 (the engine quantizes at load)")
    args = ap.parse_args()
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out}: exists and is not empty")
    mx.random.seed(args.seed)
    if args.mtp:
        return write_mtp(args.shape, out)
    model = random_model(args.shape)
    config = {"model_type": "llama", "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
              "tie_word_embeddings": False, "eos_token_id": 0, **SHAPES[args.shape]}
    if args.bits:
        nn.quantize(model, group_size=64, bits=args.bits)
        config["quantization"] = {"group_size": 64, "bits": args.bits}
    mx.eval(model.parameters())
    out.mkdir(parents=True, exist_ok=True)
    save_model(out, model)
    (out / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    for name in TOKENIZER_FILES:
        shutil.copy(Path(EMBEDDED_TARGET) / name, out / name)
    print(json.dumps({"out": str(out), "shape": args.shape, "bits": args.bits,
                      "bytes": sum(p.stat().st_size for p in out.glob("*.safetensors"))}))


def write_mtp(shape: str, out: Path) -> None:
    from mlx.utils import tree_flatten

    from specdec.mtp import MTPArgs, MTPHead
    sh = SHAPES[shape]
    margs = MTPArgs(hidden_size=sh["hidden_size"], intermediate_size=sh["intermediate_size"],
                    num_attention_heads=sh["num_attention_heads"], num_key_value_heads=sh["num_key_value_heads"],
                    vocab_size=sh["vocab_size"], rope_theta=500000.0)
    head = MTPHead(margs)
    head.set_dtype(mx.float16)
    mx.eval(head.parameters())
    out.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(head.parameters())))
    (out / "config.json").write_text(json.dumps(vars(margs), indent=1) + "\n")
    for name in TOKENIZER_FILES:
        shutil.copy(Path(EMBEDDED_TARGET) / name, out / name)
    print(json.dumps({"out": str(out), "shape": shape, "mtp": True,
                      "bytes": sum(p.stat().st_size for p in out.glob("*.safetensors"))}))


if __name__ == "__main__":
    main()
