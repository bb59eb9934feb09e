"""Apple silicon GPU and core readings: GPU utilization and memory from IOAccelerator's
PerformanceStatistics (`ioreg -a`, a plist), GPU cores (system_profiler) and the
performance and efficiency core counts (sysctl hw.perflevelN).

Parsers are pure; the readers call the tools through info.run_quiet (None: a tool missing,
failing or hanging) and answer None or "unknown" off macOS.
"""

from __future__ import annotations

import plistlib
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any
from xml.parsers.expat import ExpatError

import msgspec

from harness.collect.host.info import UNKNOWN, run_quiet
from harness.collect.host.ioregtext import parse_ioreg_text

Run = Callable[..., "str | None"]

IOREG_GPU = ["ioreg", "-r", "-d", "1", "-w", "0", "-c", "IOAccelerator", "-a"]
GPU_CORES = ["system_profiler", "SPDisplaysDataType", "-json"]
SYSCTL_HW = ["sysctl", "hw"]   # every hw.* value; a perflevel name older macOS lacks is no error


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


def ioreg_entries(output: bytes | str | None) -> list[dict[str, Any]]:
    """ioreg's entries: from its plist (`-a`, what the readers run), or from its text form (what
    people publish; harness.collect.host.ioregtext). [] for no output or neither form."""
    if not output:
        return []
    data = output.encode() if isinstance(output, str) else output
    if data.lstrip()[:1] == b"<" or data.startswith(b"bplist"):
        try:
            return _entries(plistlib.loads(data))
        except (plistlib.InvalidFileException, ExpatError, ValueError, TypeError):
            return []    # a cut or damaged plist (ioreg killed at the timeout) reads as none
    return parse_ioreg_text(data.decode("utf-8", errors="replace"))


class _Accelerator(msgspec.Struct):
    """What is read of one IOAccelerator entry (its other properties are not)."""
    stats: Any = msgspec.field(default=None, name="PerformanceStatistics")
    core_count: Any = msgspec.field(default=None, name="gpu-core-count")


def _accelerators(xml_bytes: bytes | str | None) -> list[_Accelerator]:
    return [msgspec.convert(e, _Accelerator) for e in ioreg_entries(xml_bytes)]


def parse_ioreg_gpu(xml_bytes: bytes | str | None) -> AppleGpu | None:
    """`ioreg -r -d 1 -w 0 -c IOAccelerator -a` (an XML plist; the text form also reads) -> the
    first accelerator's PerformanceStatistics as AppleGpu; None when there is no output or no
    entry has PerformanceStatistics."""
    for entry in _accelerators(xml_bytes):
        if isinstance(entry.stats, dict):
            return gpu_from_stats(entry.stats)
    return None


def ioreg_gpu_core_count(xml_bytes: bytes | str | None) -> int | None:
    """The AGX accelerator's "gpu-core-count" from the same output; None where absent."""
    for entry in _accelerators(xml_bytes):
        count = _int_or_none(entry.core_count)
        if count is not None:
            return count
    return None


class _Adapter(msgspec.Struct):
    sppci_cores: Any = None


class _Displays(msgspec.Struct):
    """system_profiler's display adapters (SPDisplaysDataType); not a list reads as none."""
    adapters: list[Any] = msgspec.field(default_factory=list, name="SPDisplaysDataType")


def parse_gpu_cores(json_text: str | None) -> int | str:
    """`system_profiler SPDisplaysDataType -json` -> the Apple GPU's "sppci_cores" as an int,
    "unknown" where no display adapter gives it (an Intel Mac, a failed call)."""
    try:
        data = msgspec.json.decode(json_text or "", type=_Displays)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return UNKNOWN
    for adapter in data.adapters:
        cores = msgspec.convert(adapter, _Adapter).sppci_cores if isinstance(adapter, dict) else None
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


def _int_value(values: dict[str, str], name: str) -> int | None:
    try:
        return int(values[name])
    except (KeyError, ValueError):
        return None


def core_levels(values: dict[str, str]) -> list[tuple[str | None, int]]:
    """(name, physical cores) per performance level, fastest first (hw.perflevel0 is the
    fastest); the name is None where this macOS does not print hw.perflevelN.name."""
    levels = []
    for n in range(8):
        count = _int_value(values, f"hw.perflevel{n}.physicalcpu")
        if count is None:
            break
        levels.append((values.get(f"hw.perflevel{n}.name") or None, count))
    return levels


@dataclass(frozen=True)
class CoreCounts:
    """Physical cores by kind, and by performance level (name -> cores, fastest first)."""
    performance_cores: int | str
    efficiency_cores: int | str
    core_levels: dict[str, int] | str


NO_CORE_COUNTS = CoreCounts(performance_cores=UNKNOWN, efficiency_cores=UNKNOWN, core_levels=UNKNOWN)


def parse_core_counts(text: str | None) -> CoreCounts:
    """`sysctl hw` -> performance and efficiency core counts, and the cores per level.

    Levels named "Efficiency" count as efficiency cores, every other level as performance
    cores (M5 names its fastest level "Super"). Without names (older macOS), perflevel0 is the
    performance level and perflevel1 the efficiency one. "unknown" where sysctl printed no
    perflevel (an Intel Mac, a failed call)."""
    levels = core_levels(parse_sysctl(text))
    if not levels:
        return NO_CORE_COUNTS
    if all(name is None for name, _ in levels):
        named = [("Performance" if i == 0 else "Efficiency", c) for i, (_, c) in enumerate(levels)]
    else:
        named = [(name or UNKNOWN, c) for name, c in levels]
    return CoreCounts(performance_cores=sum(c for name, c in named if name != "Efficiency"),
                      efficiency_cores=sum(c for name, c in named if name == "Efficiency"),
                      core_levels={name: c for name, c in named})


# ---------------------------------------------------------------- readers (darwin only)

def _run(run: Run | None) -> Run:
    # Looked up at call time, so a test that replaces this module's run_quiet reaches it.
    return run if run is not None else run_quiet


def gpu_utilization(run: Run | None = None) -> AppleGpu | None:
    """This Mac's GPU utilization and memory now; None off macOS or where ioreg gives none."""
    if sys.platform != "darwin":
        return None
    return parse_ioreg_gpu(_run(run)(IOREG_GPU))


def core_counts(run: Run | None = None) -> CoreCounts:
    """Cores by kind and level; "unknown" off macOS or where unreadable."""
    if sys.platform != "darwin":
        return NO_CORE_COUNTS
    return parse_core_counts(_run(run)(SYSCTL_HW))


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
