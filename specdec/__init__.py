"""specdec: an instrumented MLX speculative-decoding engine with an embedded model pair."""
from specdec import blas as _blas

_blas.preload()  # before anything imports mlx.core: MLX's cblas symbols bind at its load

__version__ = "0.1.0"
