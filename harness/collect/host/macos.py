"""macOS host readings beside pmset and tmutil (thermal.py): the thermal pressure level and
where it was read, memory pressure and swap, and whether Spotlight is indexing.

Thermal pressure comes from ProcessInfo.thermalState (Foundation through PyObjC, no root),
else `powermetrics -s thermal` (root only), else `pmset -g therm` (a recorded warning level;
on Apple silicon pmset usually has none). Parsers are pure; the readers call the tools through
info.run_quiet, or the `run` they are given (None: a tool missing, failing or hanging).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from harness.collect.host.applegpu import (  # noqa: F401  (one import point for macOS readings)
    AppleGpu,
    core_counts,
    gpu_cores,
    gpu_utilization,
    parse_core_counts,
    parse_gpu_cores,
    parse_ioreg_gpu,
)
from harness.collect.host.info import UNKNOWN, run_quiet
from harness.collect.host.processes import parse_ps

Run = Callable[..., "str | None"]

LEVELS = ("nominal", "fair", "serious", "critical")
SOURCES = ("ProcessInfo.thermalState", "powermetrics", "pmset", "none")

# ---------------------------------------------------------------- thermal pressure

# powermetrics' thermal sampler names the levels as the kernel's thermal pressure does.
_POWERMETRICS_LEVELS = {"nominal": "nominal", "moderate": "fair", "heavy": "serious",
                        "trapping": "critical", "sleeping": "critical"}


def level_of_thermal_state(state: object) -> str:
    """NSProcessInfoThermalState (0 nominal, 1 fair, 2 serious, 3 critical) -> its name."""
    if isinstance(state, int) and not isinstance(state, bool) and 0 <= state < len(LEVELS):
        return LEVELS[state]
    return UNKNOWN


def parse_thermal_pressure_powermetrics(text: str | None) -> str:
    """`powermetrics -s thermal -n 1`'s "Current pressure level: Nominal" -> "nominal",
    "fair", "serious" or "critical"; "unknown" without that line (no root: an error instead)."""
    m = re.search(r"^\s*Current pressure level:\s*(\w+)", text or "", re.MULTILINE)
    return _POWERMETRICS_LEVELS.get(m.group(1).lower(), UNKNOWN) if m else UNKNOWN


# IOPMLib's thermal warning levels as pmset prints them ("Thermal Warning Level = N"):
# normal 0, danger 5 (newer headers 100), crisis 10 (110).
_PMSET_THERMAL = {0: "nominal", 5: "serious", 100: "serious", 10: "critical", 110: "critical"}


def parse_pmset_pressure(text: str | None) -> str:
    """`pmset -g therm` -> a thermal pressure level, from a recorded "Thermal Warning Level",
    "Performance Warning Level" or CPU_Speed_Limit; "unknown" where nothing is recorded (Apple
    silicon's "Note: No thermal warning level has been recorded": the levels are not published,
    which says nothing either way)."""
    found: list[str] = []
    for line in (text or "").splitlines():
        if m := re.match(r"\s*.*?Thermal Warning Level\s*[=:]\s*(\d+)", line, re.IGNORECASE):
            found.append(_PMSET_THERMAL.get(int(m.group(1)), "serious"))
        elif m := re.match(r"\s*.*?Performance Warning Level\s*[=:]\s*(\d+)", line, re.IGNORECASE):
            found.append("nominal" if int(m.group(1)) == 0 else "fair")
        elif m := re.match(r"\s*CPU_Speed_Limit\s*=\s*(\d+)\s*$", line):
            found.append("nominal" if int(m.group(1)) >= 100 else "serious")
    return max(found, key=LEVELS.index) if found else UNKNOWN


def _process_info_state() -> str:
    try:
        from Foundation import NSProcessInfo  # pyobjc-framework-Cocoa (darwin only)
    except ImportError:
        return UNKNOWN
    try:
        return level_of_thermal_state(int(NSProcessInfo.processInfo().thermalState()))
    except Exception:  # an odd PyObjC build must not stop the run
        return UNKNOWN


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def thermal_pressure(run: Run | None = None, *, process_info: Callable[[], str] | None = None,
                     is_root: Callable[[], bool] | None = None) -> tuple[str, str]:
    """(level, source): level "nominal", "fair", "serious", "critical" or "unknown"; source the
    reading it came from: "ProcessInfo.thermalState", "powermetrics", "pmset", or "none".
    powermetrics is asked only as root (without root it prints an error and no level)."""
    if sys.platform != "darwin":
        return UNKNOWN, "none"
    call = run if run is not None else run_quiet
    level = (process_info or _process_info_state)()
    if level in LEVELS:
        return level, "ProcessInfo.thermalState"
    if (is_root or _is_root)():
        level = parse_thermal_pressure_powermetrics(
            call(["powermetrics", "-s", "thermal", "-n", "1", "-i", "1"], timeout=5.0))
        if level in LEVELS:
            return level, "powermetrics"
    level = parse_pmset_pressure(call(["pmset", "-g", "therm"]))
    if level in LEVELS:
        return level, "pmset"
    return UNKNOWN, "none"


# ---------------------------------------------------------------- memory pressure and swap

_VM_PRESSURE = {1: "normal", 2: "warn", 4: "critical"}
_UNITS = {"B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_vm_pressure_level(text: str | None) -> str:
    """`sysctl -n kern.memorystatus_vm_pressure_level` (1 normal, 2 warn, 4 critical), or the
    "kern.memorystatus_vm_pressure_level: N" line of a `sysctl NAME ...` -> its name."""
    m = re.search(r"(?:^|kern\.memorystatus_vm_pressure_level:)\s*(\d+)\s*$", text or "", re.MULTILINE)
    return _VM_PRESSURE.get(int(m.group(1)), UNKNOWN) if m else UNKNOWN


def parse_memory_pressure(text: str | None) -> int | str:
    """`memory_pressure`'s "System-wide memory free percentage: N%" -> N; "unknown" without it."""
    m = re.search(r"System-wide memory free percentage:\s*(\d+)\s*%", text or "")
    return int(m.group(1)) if m else UNKNOWN


@dataclass(frozen=True)
class SwapUsage:
    """`sysctl vm.swapusage` in bytes."""
    total_bytes: int
    used_bytes: int
    free_bytes: int


def _swap_bytes(name: str, text: str) -> int | None:
    # A comma decimal separator is the locale's (de_DE prints "total = 1024,00M").
    found = re.findall(rf"\b{name}\s*=\s*(\d+(?:[.,]\d+)?)([BKMGT])", text)
    if not found:
        return None
    num, unit = found[-1]
    return round(float(num.replace(",", ".")) * _UNITS[unit])


def parse_swapusage(text: str | None) -> SwapUsage | str:
    """`sysctl vm.swapusage` ("total = 2048.00M  used = 1021.75M  free = 1026.25M  (encrypted)")
    -> SwapUsage; "unknown" unless all three are there."""
    total, used, free = (_swap_bytes(name, text or "") for name in ("total", "used", "free"))
    if total is None or used is None or free is None:
        return UNKNOWN
    return SwapUsage(total_bytes=total, used_bytes=used, free_bytes=free)


MEMORY_SYSCTL = ["sysctl", "kern.memorystatus_vm_pressure_level", "vm.swapusage"]


@dataclass(frozen=True)
class MemoryState:
    memory_pressure: str            # "normal" | "warn" | "critical" | "unknown"
    swap_used_bytes: int | str      # "unknown" where sysctl did not say


def memory_state(run: Run | None = None) -> MemoryState:
    """Memory pressure and swap in use, both from one sysctl call."""
    text = (run if run is not None else run_quiet)(MEMORY_SYSCTL)
    swap = parse_swapusage(text)
    return MemoryState(memory_pressure=parse_vm_pressure_level(text),
                       swap_used_bytes=swap.used_bytes if isinstance(swap, SwapUsage) else UNKNOWN)


# ---------------------------------------------------------------- Spotlight

SPOTLIGHT_PROCESSES = ("mds", "mds_stores", "mdworker", "mdworker_shared")
SPOTLIGHT_BUSY_PCT = 10.0   # their CPU together, in percent of one core; idle they read ~0
PS = ["ps", "-A", "-o", "pid=,ppid=,pcpu=,comm="]


def spotlight_busy(processes: Iterable[tuple[str, float]],
                   threshold_pct: float = SPOTLIGHT_BUSY_PCT) -> bool:
    """(name, cpu percent) pairs -> whether Spotlight's processes together use threshold_pct
    or more of a core (indexing)."""
    return sum(pct for name, pct in processes if name in SPOTLIGHT_PROCESSES) >= threshold_pct


def spotlight_indexing(run: Run | None = None) -> bool | str:
    """Spotlight busy now, from ps (mds and mds_stores run as root: psutil cannot read their
    CPU time without root, ps can); "unknown" where ps gives nothing."""
    text = (run if run is not None else run_quiet)(PS)
    table = parse_ps(text or "")
    if not table:
        return UNKNOWN
    return spotlight_busy((name, pct) for _, pct, name in table.values())
