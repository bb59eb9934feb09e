"""What a record says about the GPU an engine ran on, and which arms ran on one.

An arm ran on a GPU when its engine said so (the result's `engine.device`, e.g. "Device(gpu, 0)"),
whatever CPU BLAS its process also loaded. The stack is read from the record's host section
(harness.collect.host.info): the GPU's name and memory, the NVIDIA driver, and `gpu.cuda` (the
driver's CUDA version, the CUDA runtime, cuBLAS, cuDNN). A record made before the host section
had `gpu.cuda` may still name a loaded cuBLAS or cuDNN in its BLAS section's library list (their
file names carry the version): that is read, and said so. Anything else is "unknown", never a guess.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from harness.core.cudalibs import CUDA_LIBS, version_in
from harness.core.hostinfo import CudaStack, HostBlas, HostGpu, HostInfo, as_host

UNKNOWN = "unknown"
GiB = 2**30

# Device strings an engine gives for a GPU: MLX's "Device(gpu, 0)", torch-style "cuda:0", "mps".
_GPU_DEVICE = re.compile(r"\bgpu\b|\bcuda\b|\bmetal\b|\bmps\b", re.IGNORECASE)
LABELS = {"cuda_runtime": "CUDA runtime", "cublas": "cuBLAS", "cudnn": "cuDNN"}


def is_gpu_device(device: Any) -> bool:
    """True for an engine device string naming a GPU ("Device(gpu, 0)", "cuda:0", "mps")."""
    return isinstance(device, str) and bool(_GPU_DEVICE.search(device))


def library_version(paths: Any, stem: str) -> tuple[str, str] | None:
    """(version, file name) of the first library in `paths` named stem + a dotted version with at
    least a minor part ("libcublas.so." -> libcublas.so.13.1.0.3), or None."""
    if not isinstance(paths, list):
        return None
    for p in paths:
        name = os.path.basename(str(p))
        v = version_in(name, stem, whole=True)
        if v:
            return v, name
    return None


@dataclass(frozen=True)
class GpuStack:
    """The GPU and the libraries beneath an engine's arithmetic, each "unknown" when unread."""

    backend: str                      # MLX's: "cuda", "metal", "none" or unknown
    name: str
    generation: str                   # sm_90, applegpu_g15s, ...
    memory_gib: float | None
    driver: str                       # NVIDIA driver version
    cuda: str                         # the CUDA version the driver supports (nvidia-smi's banner)
    cuda_runtime: str
    cublas: str
    cudnn: str
    macos: str
    # label ("cuBLAS") -> where its value came from when not from the host's gpu section itself
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def metal(self) -> bool:
        return self.backend == "metal" or self.generation.startswith("applegpu")


def _text(v: Any) -> str:
    return UNKNOWN if v is None or v == "" else str(v)


def _memory_gib(gpu: HostGpu) -> float | None:
    info = gpu.mlx_device_info if isinstance(gpu.mlx_device_info, dict) else {}
    for key in ("total_memory", "memory_size"):          # CUDA, Metal: bytes of the device MLX used
        v = info.get(key)
        if isinstance(v, (int, float)) and v > 0:
            return round(v / GiB, 1)
    nvidia = gpu.nvidia_gpus
    if len(nvidia) == 1:                                 # one board: nvidia-smi's "143771 MiB"
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*MiB", nvidia[0].memory_total.strip())
        if m:
            return round(float(m.group(1)) / 1024, 1)
    return None


def _library(blas: HostBlas, stem: str) -> tuple[str, str] | None:
    """A library named stem among the BLAS section's mapped libraries (an older record's)."""
    return library_version(blas.mapped_libraries, stem) or library_version(blas.libraries, stem)


def gpu_stack(host: HostInfo | dict[str, Any]) -> GpuStack:
    """The record's host section read as a GPU stack; every field it does not hold is unknown."""
    h = as_host(host)
    gpu, blas = h.gpu, h.blas
    cuda = gpu.cuda if isinstance(gpu.cuda, CudaStack) else CudaStack()
    drivers = sorted({r.driver_version for r in gpu.nvidia_gpus if r.driver_version not in ("", UNKNOWN)})
    sources: dict[str, str] = {}

    def version(lib: str, recorded: str) -> str:
        """A library's version (lib: a CUDA_LIBS name) as the host section recorded it, else
        from an older record's list of loaded libraries, which `sources` then names."""
        v = _text(recorded)
        if v == UNKNOWN:
            found = _library(blas, CUDA_LIBS[lib])
            if found:
                v = found[0]
                sources[LABELS[lib]] = f"the loaded {found[1]} in the record's BLAS section"
        return v

    return GpuStack(
        backend=_text(gpu.mlx_backend),
        name=_text(gpu.name),
        generation=_text(gpu.generation),
        memory_gib=_memory_gib(gpu),
        driver=", ".join(drivers) or UNKNOWN,
        cuda=_text(cuda.cuda_driver_api),
        cuda_runtime=version("cuda_runtime", cuda.cuda_runtime),
        cublas=version("cublas", cuda.cublas),
        cudnn=version("cudnn", cuda.cudnn),
        macos=_text(h.os.macos_version),
        sources=sources,
    )
