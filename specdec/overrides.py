"""Environment overrides the engine reads, and which of them are in force."""
from __future__ import annotations

import os

PREFIX = "SPECDEC_"
# Variables that change a shipping decision or the measurement; any SPECDEC_* var is reported.
KNOWN = {
    "SPECDEC_ALLOW_INEXACT": "engage speculative decoding even when the exactness probe fails",
    "SPECDEC_QUANTIZE_DRAFTER": "0 keeps the drafter dense instead of 4-bit affine, group 64",
    "SPECDEC_PROFILE": "1 syncs after every round stage for attribution (changes timing)",
    "SPECDEC_INJECT_WORK": "test-only fault: adds this fraction of a forward's work to every target decode forward",
    "SPECDEC_FORCE_INEXACT": "test-only: perturbs the probe's block logits so the gate fails",
    "SPECDEC_BLAS": "reference skips the OpenBLAS preload",
    "SPECDEC_CUDNN_SDPA": "1 keeps MLX's cuDNN attention on CUDA (the engine turns it off by default)",
}


def in_force(environ: dict | None = None) -> dict[str, str]:
    """Every SPECDEC_* variable set in the environment, by name."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items()) if k.startswith(PREFIX)}


def flag(name: str, default: bool = False) -> bool:
    val = os.environ.get(name)
    if val is None or val == "":
        return default
    return val.strip().lower() not in ("0", "false", "no", "off")


def number(name: str, default: float = 0.0) -> float:
    val = os.environ.get(name, "")
    try:
        return float(val) if val.strip() else default
    except ValueError:
        return default
