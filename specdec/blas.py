"""Make MLX's CPU backend use an optimized BLAS, and say which BLAS runs.

The mlx-cpu wheel for Linux bundles the reference BLAS (a 1024x1024 fp32 matmul at a few
GFLOP/s). Loading OpenBLAS with RTLD_GLOBAL before MLX makes MLX's cblas symbols resolve to
it (about 50x faster). This must run before `mlx.core` is first imported, which is why
`specdec/__init__.py` calls it first. SPECDEC_BLAS=reference skips it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from pathlib import Path

_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/libopenblas.so.0",
    "/usr/lib64/libopenblas.so.0",
    "/usr/lib/libopenblas.so.0",
)
_state: dict = {"preloaded": None, "reason": "not attempted"}


def _find_openblas() -> str | None:
    for path in _CANDIDATES:
        if Path(path).exists():
            return path
    return ctypes.util.find_library("openblas")


def preload() -> dict:
    """Preload OpenBLAS on Linux if MLX is not imported yet; returns what happened."""
    if not sys.platform.startswith("linux"):
        _state.update(preloaded=None, reason="not Linux")
    elif os.environ.get("SPECDEC_BLAS", "").lower() == "reference":
        _state.update(preloaded=None, reason="SPECDEC_BLAS=reference")
    elif "mlx.core" in sys.modules:
        _state.update(preloaded=None, reason="mlx.core was imported before specdec")
    elif (path := _find_openblas()) is None:
        _state.update(preloaded=None, reason="no OpenBLAS on this host (Debian: apt-get install libopenblas0-pthread)")
    else:
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            _state.update(preloaded=path, reason="preloaded")
        except OSError as exc:
            _state.update(preloaded=None, reason=f"could not load {path}: {exc}")
    return dict(_state)


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _library_providing(symbol: str) -> str | None:
    # Ask the dynamic linker which loaded library the global `symbol` resolves to.
    try:
        glob = ctypes.CDLL(None)
        addr = ctypes.cast(getattr(glob, symbol), ctypes.c_void_p).value
        libdl = ctypes.CDLL(ctypes.util.find_library("dl") or "libc.so.6")
        info = _DlInfo()
        if libdl.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) and info.dli_fname:
            return info.dli_fname.decode()
    except (AttributeError, OSError, TypeError):
        return None
    return None


def _mapped_blas() -> str | None:
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return None
    libs = sorted({line.split()[-1] for line in maps if "blas" in line.lower() and "/" in line})
    return libs[0] if libs else None


def blas_info() -> dict:
    """Which BLAS MLX's CPU matmuls call on this host, and how that was decided."""
    if sys.platform == "darwin":
        return {"blas": "accelerate", "library": "Accelerate.framework", "how": "macOS MLX links Accelerate"}
    lib = _library_providing("cblas_sgemm")
    if lib is None:
        # Nothing global provides it: MLX binds its own bundled copy privately (RTLD_LOCAL).
        lib = _mapped_blas()
    if lib is None:
        name = "unknown"
    elif "openblas" in lib.lower():
        name = "openblas"
    elif "mlx_cpu.libs" in lib or "libblas" in Path(lib).name:
        name = "reference (bundled with mlx-cpu)"
    else:
        name = Path(lib).name
    return {"blas": name, "library": lib or "unknown", "how": "dladdr(cblas_sgemm)",
            "preload": _state["reason"]}
