"""Environment overrides the engine reads, and which of them are in force."""
from __future__ import annotations

import os

from specdec.errors import SpecdecError

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


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
BLAS_VALUES = ("reference", "openblas")


def flag(name: str, default: bool = False) -> bool:
    """A yes/no variable; unset or empty is the default. Any other word is an error, not a guess:
    SPECDEC_ALLOW_INEXACT=maybe must not engage an inexact path."""
    val = os.environ.get(name)
    if val is None or val.strip() == "":
        return default
    v = val.strip().lower()
    if v in _TRUE or v in _FALSE:
        return v in _TRUE
    raise SpecdecError(f"{name} must be one of {', '.join(_TRUE + _FALSE)} (got {val!r})")


def number(name: str, default: float = 0.0) -> float:
    """A number variable; unset or empty is the default. A value that is not a number is an
    error: read as the default, a typo would measure the unfaulted engine under the fault's name."""
    val = os.environ.get(name, "")
    if not val.strip():
        return default
    try:
        return float(val)
    except ValueError:
        raise SpecdecError(f"{name} must be a number (got {val!r})") from None


def check_blas() -> None:
    """SPECDEC_BLAS is read at import, before any generation can fail; an unknown value fails
    the first generation instead of running a BLAS its name does not say."""
    val = os.environ.get("SPECDEC_BLAS", "").strip().lower()
    if val and val not in BLAS_VALUES:
        raise SpecdecError(f"SPECDEC_BLAS must be one of {', '.join(BLAS_VALUES)} or unset "
                           f"(got {os.environ['SPECDEC_BLAS']!r})")
