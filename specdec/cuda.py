"""The engine's attention path on CUDA, chosen by measurement (reports/ has the before/after).

MLX's CUDA backend runs scaled dot-product attention through cuDNN for fp16/bf16 when it can,
and builds a cuDNN plan for every new shape: a speculative verify forward meets a new KV length
every round, so every round paid a plan build (83 ms against 18 ms for a shape seen before on
an H200 with an 8B-shape target; the plan cache of 256 entries thrashes within a 256-token run).
MLX's own fused kernels need no plan. This engine therefore turns cuDNN attention off by
default on CUDA, as its own decision, and reports it; SPECDEC_CUDNN_SDPA=1 keeps MLX's default
(not a shipping configuration).

MLX reads MLX_CUDA_USE_CUDNN_SDPA once per process, the first time it builds an attention op.
The engine sets it for that moment only, latches it with one tiny attention op, and removes it,
so the environment the harness sees is the user's. A user's own MLX_CUDA_USE_CUDNN_SDPA wins
(and is an inherited override). The choice is per process: asking for the other one later in the
same process is an error, never a silent mix.
"""
from __future__ import annotations

import os
import re

import mlx.core as mx

from specdec import overrides
from specdec.errors import SpecdecError

MLX_VAR = "MLX_CUDA_USE_CUDNN_SDPA"
ENGINE_VAR = "SPECDEC_CUDNN_SDPA"
_latched: dict | None = None


def on_cuda() -> bool:
    cuda = getattr(mx, "cuda", None)
    try:
        return bool(cuda is not None and cuda.is_available() and mx.default_device() == mx.gpu)
    except Exception:  # an MLX without the CUDA module's query
        return False


def _atoi(text: str) -> int:
    """The value C's atoi gives, as MLX reads its variables: leading digits after optional
    blanks and sign, else 0 ("true", "on" and "yes" read as 0: off)."""
    m = re.match(r"\s*([+-]?\d+)", text)
    return int(m.group(1)) if m else 0


def _wanted() -> tuple[bool, str]:
    """(cuDNN attention on?, who decided)."""
    if MLX_VAR in os.environ:
        return _atoi(os.environ[MLX_VAR]) != 0, f"{MLX_VAR}={os.environ[MLX_VAR]} (inherited)"
    if overrides.flag(ENGINE_VAR):
        return True, f"{ENGINE_VAR}=1 (MLX's default kept)"
    return False, "engine default (plan builds per KV length made every verify round a first use)"


def apply_attention_default() -> dict:
    """Latch this process's attention path before the first model runs; what it chose, for the
    engine's report. Off CUDA there is nothing to choose."""
    global _latched
    if not on_cuda():
        return {"backend": "not CUDA", "cudnn_sdpa": None, "decided_by": "no choice off CUDA"}
    on, who = _wanted()
    if _latched is not None:
        if _latched["cudnn_sdpa"] != on:
            raise SpecdecError(f"cuDNN attention was latched {'on' if _latched['cudnn_sdpa'] else 'off'} in this "
                               f"process ({_latched['decided_by']}); {who} asks otherwise: MLX reads it once per "
                               "process, so run that configuration in its own session")
        return dict(_latched)
    user = MLX_VAR in os.environ
    if not user:
        os.environ[MLX_VAR] = "1" if on else "0"
    try:
        q = mx.zeros((1, 1, 2, 64), dtype=mx.float16)
        mx.eval(mx.fast.scaled_dot_product_attention(q, q, q, scale=1.0, mask="causal"))
    finally:
        if not user:
            del os.environ[MLX_VAR]
    _latched = {"backend": "CUDA", "cudnn_sdpa": on, "decided_by": who}
    return dict(_latched)
