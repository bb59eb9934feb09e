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
from harness.core.schema import section

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


def _memory_gib(gpu: dict[str, Any], nvidia: list[dict[str, Any]]) -> float | None:
    info = gpu.get("mlx_device_info")
    info = info if isinstance(info, dict) else {}
    for key in ("total_memory", "memory_size"):          # CUDA, Metal: bytes of the device MLX used
        v = info.get(key)
        if isinstance(v, (int, float)) and v > 0:
            return round(v / GiB, 1)
    if len(nvidia) == 1:                                 # one board: nvidia-smi's "143771 MiB"
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*MiB", str(nvidia[0].get("memory_total", "")).strip())
        if m:
            return round(float(m.group(1)) / 1024, 1)
    return None


def gpu_stack(host: dict[str, Any]) -> GpuStack:
    """The record's host section read as a GPU stack; every field it does not hold is unknown."""
    gpu, blas = section(host, "gpu"), section(host, "blas")
    raw = gpu.get("nvidia")
    nvidia = [r for r in raw if isinstance(r, dict)] if isinstance(raw, list) else []
    cuda = section(gpu, "cuda")
    drivers = sorted({str(r["driver_version"]) for r in nvidia if r.get("driver_version") not in (None, "", UNKNOWN)})
    sources: dict[str, str] = {}
    versions = {}
    for key, stem in CUDA_LIBS.items():
        v = _text(cuda.get(key))
        if v == UNKNOWN:
            # An older record: the loaded libraries its BLAS section listed.
            found = library_version(blas.get("mapped_libraries"), stem) or library_version(blas.get("libraries"), stem)
            if found:
                v = found[0]
                sources[LABELS[key]] = f"the loaded {found[1]} in the record's BLAS section"
        versions[key] = v
    return GpuStack(
        backend=_text(gpu.get("mlx_backend")),
        name=_text(gpu.get("name")),
        generation=_text(gpu.get("generation")),
        memory_gib=_memory_gib(gpu, nvidia),
        driver=", ".join(drivers) or UNKNOWN,
        cuda=_text(cuda.get("cuda_driver_api")),
        cuda_runtime=versions["cuda_runtime"],
        cublas=versions["cublas"],
        cudnn=versions["cudnn"],
        macos=_text(section(host, "os").get("macos_version")),
        sources=sources,
    )
