"""Apple silicon GPU and core readings: GPU utilization and memory from IOAccelerator's
PerformanceStatistics (`ioreg -a`, a plist), GPU cores (system_profiler) and the
performance and efficiency core counts (sysctl hw.perflevelN).

Parsers are pure; the readers call the tools through info.run_quiet (None: a tool missing,
failing or hanging) and answer None or "unknown" off macOS.
"""

from __future__ import annotations

import json
import plistlib
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from harness.collect.host.info import UNKNOWN, run_quiet

Run = Callable[..., "str | None"]

IOREG_GPU = ["ioreg", "-r", "-d", "1", "-w", "0", "-c", "IOAccelerator", "-a"]
GPU_CORES = ["system_profiler", "SPDisplaysDataType", "-json"]
PERF_LEVELS = ["sysctl", "hw.perflevel0.physicalcpu", "hw.perflevel1.physicalcpu"]


@dataclass(frozen=True)
class AppleGpu:
    """One IOAccelerator's PerformanceStatistics; None where the driver does not publish a key."""

    device_pct: int | None      # "Device Utilization %": the GPU busy with any work
    renderer_pct: int | None    # "Renderer Utilization %": the shader cores (compute included)
    tiler_pct: int | None       # "Tiler Utilization %": the tiler (geometry)
    in_use_bytes: int | None    # "In use system memory": unified memory the GPU's resources hold
    alloc_bytes: int | None     # "Alloc system memory": unified memory the driver has allocated

    def to_dict(self) -> dict[str, int | None]:
        return asdict(self)


_GPU_KEYS = {"device_pct": "Device Utilization %", "renderer_pct": "Renderer Utilization %",
             "tiler_pct": "Tiler Utilization %", "in_use_bytes": "In use system memory",
             "alloc_bytes": "Alloc system memory"}


def _int_or_none(value: Any) -> int | None:
    # plistlib gives <integer> as int; a bool is an int too, and is not a reading.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def gpu_from_stats(stats: dict[str, Any]) -> AppleGpu:
    """A PerformanceStatistics dict -> AppleGpu (absent or non-integer keys: None)."""
    return AppleGpu(**{field: _int_or_none(stats.get(key)) for field, key in _GPU_KEYS.items()})


def _entries(root: Any) -> list[dict[str, Any]]:
    # `ioreg -r -a` prints an array of entries; a single entry is a dict.
    if isinstance(root, dict):
        return [root]
    return [e for e in root if isinstance(e, dict)] if isinstance(root, list) else []


def parse_ioreg_gpu(xml_bytes: bytes | str | None) -> AppleGpu | None:
    """`ioreg -r -d 1 -w 0 -c IOAccelerator -a` (an XML plist) -> the first accelerator's
    PerformanceStatistics as AppleGpu; None when there is no output, it is no plist, or no
    entry has PerformanceStatistics."""
    if not xml_bytes:
        return None
    data = xml_bytes.encode() if isinstance(xml_bytes, str) else xml_bytes
    try:
        root = plistlib.loads(data)
    except (plistlib.InvalidFileException, ValueError, TypeError):
        return None
    for entry in _entries(root):
        stats = entry.get("PerformanceStatistics")
        if isinstance(stats, dict):
            return gpu_from_stats(stats)
    return None


def ioreg_gpu_core_count(xml_bytes: bytes | str | None) -> int | None:
    """The AGX accelerator's "gpu-core-count" from the same plist; None where absent."""
    if not xml_bytes:
        return None
    data = xml_bytes.encode() if isinstance(xml_bytes, str) else xml_bytes
    try:
        root = plistlib.loads(data)
    except (plistlib.InvalidFileException, ValueError, TypeError):
        return None
    for entry in _entries(root):
        count = _int_or_none(entry.get("gpu-core-count"))
        if count is not None:
            return count
    return None


def parse_gpu_cores(json_text: str | None) -> int | str:
    """`system_profiler SPDisplaysDataType -json` -> the Apple GPU's "sppci_cores" as an int,
    "unknown" where no display adapter gives it (an Intel Mac, a failed call)."""
    try:
        data = json.loads(json_text or "")
    except ValueError:
        return UNKNOWN
    adapters = data.get("SPDisplaysDataType") if isinstance(data, dict) else None
    for adapter in adapters if isinstance(adapters, list) else []:
        cores = adapter.get("sppci_cores") if isinstance(adapter, dict) else None
        try:
            return int(str(cores))
        except ValueError:
            continue
    return UNKNOWN


def parse_sysctl(text: str | None) -> dict[str, str]:
    """`sysctl NAME ...` ("name: value" lines) -> {name: value}; other lines skipped."""
    out = {}
    for line in (text or "").splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() and " " not in name.strip():
            out[name.strip()] = value.strip()
    return out


def _int_value(values: dict[str, str], name: str) -> int | str:
    try:
        return int(values[name])
    except (KeyError, ValueError):
        return UNKNOWN


def parse_core_counts(text: str | None) -> dict[str, int | str]:
    """`sysctl hw.perflevel0.physicalcpu hw.perflevel1.physicalcpu` -> performance and
    efficiency core counts (perflevel0 is the fastest level, perflevel1 the next); "unknown"
    for a level sysctl does not print."""
    values = parse_sysctl(text)
    p = _int_value(values, "hw.perflevel0.physicalcpu")
    e = _int_value(values, "hw.perflevel1.physicalcpu")
    return {"performance_cores": p, "efficiency_cores": e}


# ---------------------------------------------------------------- readers (darwin only)

def _run(run: Run | None) -> Run:
    # Looked up at call time, so a test that replaces this module's run_quiet reaches it.
    return run if run is not None else run_quiet


def gpu_utilization(run: Run | None = None) -> AppleGpu | None:
    """This Mac's GPU utilization and memory now; None off macOS or where ioreg gives none."""
    if sys.platform != "darwin":
        return None
    return parse_ioreg_gpu(_run(run)(IOREG_GPU))


def core_counts(run: Run | None = None) -> dict[str, int | str]:
    """{"performance_cores", "efficiency_cores"}; "unknown" off macOS or where unreadable."""
    if sys.platform != "darwin":
        return {"performance_cores": UNKNOWN, "efficiency_cores": UNKNOWN}
    return parse_core_counts(_run(run)(PERF_LEVELS))


def gpu_cores(run: Run | None = None) -> int | str:
    """The Apple GPU's core count (system_profiler, else ioreg's "gpu-core-count");
    "unknown" off macOS or where neither tells."""
    if sys.platform != "darwin":
        return UNKNOWN
    call = _run(run)
    # system_profiler takes about a second; it runs once, with the host metadata.
    cores = parse_gpu_cores(call(GPU_CORES, timeout=15.0))
    if cores == UNKNOWN:
        cores = ioreg_gpu_core_count(call(IOREG_GPU)) or UNKNOWN
    return cores
