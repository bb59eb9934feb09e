"""Environment overrides the engine reads, and which of them are in force.

`read()` reads and validates every variable the engine knows, at the start of every generation,
whatever path the generation then takes: a value it cannot read fails the generation even where
the variable would not have been consulted (SPECDEC_ALLOW_INEXACT=maybe once passed on hosts
whose probe passed, and failed only where the probe failed).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from specdec.errors import SpecdecError

PREFIX = "SPECDEC_"
# Variables that change a shipping decision or the measurement; any SPECDEC_* var is reported.
KNOWN = {
    "SPECDEC_ALLOW_INEXACT": "engage speculative decoding even when the exactness probe fails",
    "SPECDEC_QUANTIZE_DRAFTER": "0 keeps the drafter dense instead of 4-bit affine, group 64",
    "SPECDEC_PROFILE": "1 syncs after every round stage for attribution (changes timing)",
    "SPECDEC_INJECT_WORK": "test-only fault: adds this fraction of a forward's work to every target decode forward",
    "SPECDEC_FORCE_PROBE": "test-only: fail perturbs the probe's block logits so the gate fails; pass reads "
                           "the probe as byte-identical; either way a test takes the same path on every host",
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
FORCE_PROBE_VALUES = ("pass", "fail")


@dataclass(frozen=True)
class Settings:
    """Every override the engine reads, read once per generation."""

    allow_inexact: bool = False
    profile: bool = False
    inject_work: float = 0.0
    force_probe: str | None = None      # "pass" | "fail" | None (the probe's own reading)
    quantize_drafter: bool = True
    cudnn_sdpa: bool = False


def read() -> Settings:
    """Every known override, validated; an unknown SPECDEC_* name (a typo would run the default
    under an override's label) or an unreadable value is a SpecdecError naming the variable."""
    unknown = sorted(k for k in in_force() if k not in KNOWN)
    if unknown:
        raise SpecdecError(f"{unknown[0]} is not a variable specdec reads (known: {', '.join(sorted(KNOWN))})")
    check_blas()
    work = number("SPECDEC_INJECT_WORK")
    if not (math.isfinite(work) and work >= 0):
        raise SpecdecError(f"SPECDEC_INJECT_WORK must be a finite number >= 0 (got {work})")
    force = os.environ.get("SPECDEC_FORCE_PROBE", "").strip().lower() or None
    if force is not None and force not in FORCE_PROBE_VALUES:
        raise SpecdecError(f"SPECDEC_FORCE_PROBE must be one of {', '.join(FORCE_PROBE_VALUES)} or unset "
                           f"(got {os.environ['SPECDEC_FORCE_PROBE']!r})")
    return Settings(allow_inexact=flag("SPECDEC_ALLOW_INEXACT"), profile=flag("SPECDEC_PROFILE"),
                    inject_work=work, force_probe=force,
                    quantize_drafter=flag("SPECDEC_QUANTIZE_DRAFTER", default=True),
                    cudnn_sdpa=flag("SPECDEC_CUDNN_SDPA"))


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
