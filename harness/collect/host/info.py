"""Host metadata, pyperf-style: one collector per concern, each returning its section of the
record's host section typed (harness.core.hostinfo), which collect_host writes as JSON.

Every field this host cannot tell us is the string "unknown" (never a guess), and a
collector that raises is recorded as {"error": "..."} for its section, so a record is
always written even on an odd host.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from harness.collect.host.specs import match_spec
from harness.core.cudalibs import CUDA_LIBS, version_in
from harness.core.errors import UserError
from harness.core.hostinfo import (
    CudaStack,
    HarnessInfo,
    HostBlas,
    HostCpu,
    HostGpu,
    HostMemory,
    HostMlx,
    HostOs,
    HostPython,
    NvidiaGpu,
    RepoInfo,
)

UNKNOWN = "unknown"
T = TypeVar("T")


def run_quiet(argv: list[str], timeout: float = 3.0) -> str | None:
    """stdout of argv, or None when it is missing, fails or hangs; never raises."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return done.stdout if done.returncode == 0 else None


def read_text(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def _or_unknown(value: Any) -> Any:
    return UNKNOWN if value is None or value == "" else value


def nvml_devices(read: Callable[[Any, Any], T]) -> list[T] | str:
    """read(pynvml, handle) for each NVIDIA GPU, in NVML's index order; "unknown" where NVML
    cannot answer (no driver or library, no GPU).

    nvidia-ml-py loads libnvidia-ml only here, at nvmlInit, so importing it costs nothing on a
    host without an NVIDIA driver."""
    try:
        import pynvml
    except ImportError:
        return UNKNOWN
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return UNKNOWN
    try:
        count = pynvml.nvmlDeviceGetCount()
        # No GPU reads "unknown", not []: what records read by nvidia-smi hold for it.
        if count == 0:
            return UNKNOWN
        return [read(pynvml, pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
    except pynvml.NVMLError:
        return UNKNOWN
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def nvml_field(pynvml: Any, call: Callable[[], Any], show: Callable[[Any], str] = str) -> str:
    """One NVML reading in nvidia-smi's format (show), or "unknown" where the board does not
    expose it (NVMLError_NotSupported: GB10 has no separate VRAM) or the reading fails."""
    try:
        text = show(call()).strip()
    except pynvml.NVMLError:
        return UNKNOWN
    return text or UNKNOWN


# ---------------------------------------------------------------- cpu

def _cpu_model() -> str:
    if sys.platform == "darwin":
        out = run_quiet(["sysctl", "-n", "machdep.cpu.brand_string"])
        return _or_unknown(out.strip() if out else None)
    text = read_text("/proc/cpuinfo") or ""
    # x86 says "model name"; some Arm kernels say "Model" or nothing (then lscpu knows).
    for key in ("model name", "Model", "Hardware"):
        m = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        if m:
            return m.group(1).strip()
    out = run_quiet(["lscpu"])
    m = re.search(r"^Model name:\s*(.+)$", out or "", re.MULTILINE)
    return m.group(1).strip() if m else UNKNOWN


def _apple_chip(model: str) -> str:
    # On Apple silicon the brand string is the chip name ("Apple M3 Ultra").
    if sys.platform == "darwin" and model.startswith("Apple"):
        return model
    return UNKNOWN


def cpu_info() -> HostCpu:
    import psutil

    model = _cpu_model()
    out = HostCpu(model=model, arch=_or_unknown(platform.machine()),
                  logical_cores=_or_unknown(psutil.cpu_count(logical=True)),
                  physical_cores=_or_unknown(psutil.cpu_count(logical=False)),
                  apple_chip=_apple_chip(model))
    if sys.platform == "darwin":
        from harness.collect.host.applegpu import core_counts  # it imports this module

        counts = core_counts()
        out.performance_cores, out.efficiency_cores = counts.performance_cores, counts.efficiency_cores
        out.core_levels = counts.core_levels
    return out


# ---------------------------------------------------------------- gpu

def _nvidia_gpu(pynvml: Any, handle: Any) -> NvidiaGpu:
    # nvidia-smi's strings (--query-gpu=name,driver_version,memory.total,compute_cap), as records hold them.
    def field(call: Callable[[], Any], show: Callable[[Any], str] = str) -> str:
        return nvml_field(pynvml, call, show)

    compute_cap = field(lambda: pynvml.nvmlDeviceGetCudaComputeCapability(handle), lambda cc: f"{cc[0]}.{cc[1]}")
    return NvidiaGpu(name=field(lambda: pynvml.nvmlDeviceGetName(handle)),
                     driver_version=field(pynvml.nvmlSystemGetDriverVersion),
                     memory_total=field(lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).total,
                                        lambda b: f"{b // 2**20} MiB"),
                     compute_cap=compute_cap, generation=sm_generation(compute_cap))


def nvidia_gpus() -> list[NvidiaGpu] | str:
    """One row per NVIDIA GPU (NVML), or "unknown" where NVML cannot answer."""
    return nvml_devices(_nvidia_gpu)


def cuda_driver_version() -> int | None:
    """The CUDA version the driver supports (nvidia-smi's banner "CUDA Version"), as NVML
    gives it (13000 for 13.0); None where NVML cannot answer."""
    got = nvml_devices(lambda pynvml, handle: int(pynvml.nvmlSystemGetCudaDriverVersion()))
    return got[0] if isinstance(got, list) else None


# The CUDA libraries MLX's CUDA build runs on, as pip distributions (their names vary by CUDA
# major version: the first one installed is reported), and the loaded shared objects' names.
_CUDA_DISTS = {"cuda_runtime": ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12"),
               "cublas": ("nvidia-cublas", "nvidia-cublas-cu13", "nvidia-cublas-cu12"),
               "cudnn": ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn")}


def cuda_stack(driver_cuda: int | None, maps_text: str | None) -> CudaStack:
    """CUDA (the driver's: NVML's 13000 is nvidia-smi's "CUDA Version: 13.0"), and the runtime,
    cuBLAS and cuDNN versions from their pip distributions, else from the version in a loaded
    library's file name; "unknown" for what cannot be read (never a guess)."""
    def version(lib: str) -> str:
        """lib: a name of _CUDA_DISTS and CUDA_LIBS."""
        found = next((v for v in (_dist_version(d) for d in _CUDA_DISTS[lib]) if v != UNKNOWN), UNKNOWN)
        if found == UNKNOWN and maps_text:
            found = version_in(maps_text, CUDA_LIBS[lib]) or UNKNOWN
        return found

    driver = f"{driver_cuda // 1000}.{driver_cuda % 1000 // 10}" if driver_cuda else UNKNOWN
    return CudaStack(cuda_driver_api=driver, cuda_runtime=version("cuda_runtime"), cublas=version("cublas"),
                     cudnn=version("cudnn"))


def sm_generation(compute_cap: str) -> str:
    """'9.0' -> 'sm_90', '12.1' -> 'sm_121'; anything else is unknown."""
    m = re.fullmatch(r"(\d+)\.(\d+)", compute_cap.strip())
    return f"sm_{m.group(1)}{m.group(2)}" if m else UNKNOWN


def apple_family(architecture: str) -> str:
    """'applegpu_g15s' -> 'G15' (the GPU family; the suffix is the die variant)."""
    m = re.match(r"applegpu_g(\d+)", architecture)
    return f"G{m.group(1)}" if m else UNKNOWN


def _mlx_gpu() -> tuple[str, dict[str, Any]]:
    """(backend, MLX's device_info for the GPU) or (backend 'none', {}) on a CPU-only MLX."""
    import mlx.core as mx

    if mx.metal.is_available():
        backend = "metal"
    elif hasattr(mx, "cuda") and mx.cuda.is_available():
        backend = "cuda"
    else:
        # device_info() would describe the CPU here, which is not a GPU reading.
        return "none", {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mx.metal.device_info is deprecated in newer MLX
        if hasattr(mx, "device_info"):
            info = mx.device_info(mx.gpu)
        else:
            info = mx.metal.device_info()
    return backend, {k: v for k, v in dict(info).items() if isinstance(v, (str, int, float))}


def _apple_gpu_cores() -> int | str:
    from harness.collect.host.applegpu import gpu_cores  # it imports this module

    return gpu_cores()


class _MlxDevice(msgspec.Struct, kw_only=True):
    """What the host section reads of MLX's device_info (its other keys are kept as they are)."""
    device_name: str | None = None
    architecture: str = ""


def gpu_info() -> HostGpu:
    try:
        backend, info = _mlx_gpu()
    except ImportError:
        backend, info = UNKNOWN, {}
    device = msgspec.convert(info, _MlxDevice, strict=False)
    nvidia = nvidia_gpus()
    first = nvidia[0] if isinstance(nvidia, list) and nvidia else None
    name = device.device_name or (first.name if first is not None else None)
    arch = str(device.architecture)
    generation = UNKNOWN
    if arch.startswith("applegpu"):
        generation = arch
    elif first is not None:
        generation = first.generation
    elif re.fullmatch(r"sm_\d+", arch):
        generation = arch
    out = HostGpu(mlx_backend=backend, name=_or_unknown(name), generation=generation,
                  family=apple_family(arch) if arch.startswith("applegpu") else generation,
                  mlx_device_info=info or UNKNOWN, nvidia=nvidia)
    if sys.platform == "darwin":
        out.gpu_cores = _apple_gpu_cores()
    if backend == "cuda" or isinstance(nvidia, list):
        out.cuda = cuda_stack(cuda_driver_version(), read_text("/proc/self/maps"))
    return out


# ---------------------------------------------------------------- memory, os, python

def memory_info() -> HostMemory:
    import psutil

    total = psutil.virtual_memory().total
    # GiB: what vendors' "128GB" unified-memory configurations actually are.
    return HostMemory(total_bytes=total, total_gib=round(total / 2**30, 1))


def _os_release() -> str:
    text = read_text("/etc/os-release") or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?$', text, re.MULTILINE)
    return m.group(1) if m else UNKNOWN


def os_info() -> HostOs:
    mac = platform.mac_ver()[0] if sys.platform == "darwin" else ""
    return HostOs(system=_or_unknown(platform.system()), platform=_or_unknown(platform.platform()),
                  kernel_release=_or_unknown(platform.release()), macos_version=_or_unknown(mac),
                  distribution=_os_release() if sys.platform.startswith("linux") else UNKNOWN,
                  hostname=_or_unknown(platform.node()))


def python_info() -> HostPython:
    return HostPython(version=platform.python_version(), implementation=platform.python_implementation(),
                      executable=_or_unknown(sys.executable))


# ---------------------------------------------------------------- mlx, blas

def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


def mlx_info() -> HostMlx:
    try:
        import mlx.core as mx
    except ImportError:
        return HostMlx(mlx=UNKNOWN, mlx_lm=_dist_version("mlx-lm"), default_device=UNKNOWN)
    return HostMlx(mlx=_or_unknown(getattr(mx, "__version__", None)), mlx_lm=_dist_version("mlx-lm"),
                   default_device=str(mx.default_device()))


# Names as the reference engine's blas_info() spells them, so engine and host sections agree.
_BLAS_NAMES = [("openblas", "openblas"), ("mkl", "mkl"), ("blis", "blis"),
               ("accelerate", "accelerate"), ("mlx_cpu.libs", "reference (bundled with mlx-cpu)"),
               ("libblas", "reference")]


def mapped_blas_libraries(maps_text: str) -> list[str]:
    """BLAS-like shared objects in a /proc/<pid>/maps text, in first-mapped order."""
    seen: list[str] = []
    for line in maps_text.splitlines():
        path = line.split()[-1] if len(line.split()) >= 6 else ""
        low = os.path.basename(path).lower()
        if ("blas" in low or "mkl" in low or "blis" in low) and path not in seen:
            seen.append(path)
    return seen


def classify_blas(libraries: list[str]) -> str:
    # Debian's libblas.so.3 can be OpenBLAS through alternatives: the resolved path says so.
    joined = " ".join(libraries).lower()
    for needle, name in _BLAS_NAMES:
        if needle in joined:
            return name
    return UNKNOWN


def blas_info() -> HostBlas:
    """The BLAS this (the harness's) process maps. It is an engine's only for an in-process
    arm; every engine reports its own in its result (a run's engine_info.blas)."""
    scope = "harness process: in-process engines only; each run's engine_info.blas is the engine's"
    if sys.platform == "darwin":
        return HostBlas(name="accelerate", libraries=UNKNOWN, source="platform (macOS)", scope=scope)
    try:
        import mlx.core  # noqa: F401  (map what MLX itself loads before reading the maps)
    except ImportError:
        pass
    maps = read_text("/proc/self/maps")
    if maps is None:
        return HostBlas(name=UNKNOWN, libraries=UNKNOWN, source=UNKNOWN, scope=scope)
    libs = mapped_blas_libraries(maps)
    return HostBlas(name=classify_blas(libs), libraries=libs or UNKNOWN, source="/proc/self/maps", scope=scope)


# ---------------------------------------------------------------- repo, harness

def repo_info(repo: str | None = None) -> RepoInfo:
    """The repository under test (harness.collect.provenance.repo_info): not the harness's own."""
    from harness.collect.provenance import repo_info as _repo_info

    return _repo_info(repo)


def harness_info() -> HarnessInfo:
    from harness.collect.provenance import harness_info as _harness_info

    return _harness_info()


# ---------------------------------------------------------------- all of it

def _safe(collector: Callable[[], msgspec.Struct]) -> dict[str, Any]:
    """One section as the record keeps it, or {"error": ...} where its collector broke."""
    try:
        section: dict[str, Any] = msgspec.to_builtins(collector())
    except Exception as exc:  # one broken concern must not lose the whole record
        return {"error": f"{type(exc).__name__}: {exc}"}
    return section


def collect_host(repo: str | None = None) -> dict[str, Any]:
    """Every section (cpu, gpu, memory, os, python, mlx, blas, repo, harness) as one dict each, and
    the host spec it matched ("spec", None when none did).
    repo: the repository under test (default: asv's, else the working directory's)."""
    collectors: dict[str, Callable[[], msgspec.Struct]] = {
        "cpu": cpu_info, "gpu": gpu_info, "memory": memory_info, "os": os_info,
        "python": python_info, "mlx": mlx_info, "blas": blas_info,
        "repo": lambda: repo_info(repo), "harness": harness_info,
    }
    host: dict[str, Any] = {name: _safe(fn) for name, fn in collectors.items()}
    # The host spec this host matched when the record was made (None: none matched), so the
    # record renders the same on any machine, whatever host specs that machine ships.
    try:
        spec = match_spec(host)
    except UserError as e:
        return {**host, "spec": None, "spec_error": str(e)}
    return {**host, "spec": spec.as_dict() if spec else None}
