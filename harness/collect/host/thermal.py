"""Thermal, power and backup state, its verdict, and the wait until it reads nominal: pmset and
tmutil on macOS with macos.py's thermal pressure, memory, swap and Spotlight readings, Linux
thermal zones, NVIDIA clocks and throttle reasons."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

import psutil

from harness.collect.host import macos
from harness.collect.host.info import UNKNOWN, nvml_devices, nvml_field, run_quiet

# ---------------------------------------------------------------- thermal / power / backup

def parse_pmset_therm(text: str | None) -> dict[str, Any]:
    """`pmset -g therm` "CPU_Speed_Limit = 100" lines -> {key: int}; recorded warning levels
    ("Thermal Warning Level = 5") as lines. Its "Note: No ... has been recorded" lines say that
    nothing was published (Apple silicon, mostly): they are no warning."""
    if text is None:
        return {"limits": UNKNOWN, "warnings": UNKNOWN}
    limits = {m.group(1): int(m.group(2))
              for m in re.finditer(r"^\s*(\w+)\s*=\s*(\d+)\s*$", text, re.MULTILINE)}
    warns = [ln.strip() for ln in text.splitlines()
             if "warning level" in ln.lower() and not _NOT_RECORDED.match(ln)]
    return {"limits": limits or UNKNOWN, "warnings": warns}


_NOT_RECORDED = re.compile(r"\s*Note: No .* has been recorded", re.IGNORECASE)


def parse_pmset_batt(text: str | None) -> str:
    m = re.search(r"drawing from '([^']+)'", text or "")
    return m.group(1) if m else UNKNOWN


def parse_tmutil_status(text: str | None) -> bool | str:
    m = re.search(r"\bRunning\s*=\s*(\d+)", text or "")
    return (m.group(1) == "1") if m else UNKNOWN


def _darwin_state() -> dict[str, Any]:
    therm_text = run_quiet(["pmset", "-g", "therm"])
    therm = parse_pmset_therm(therm_text)
    # pmset's answer serves the pressure's last fallback too: one pmset process, not two.
    level, source = macos.thermal_pressure(
        lambda argv, timeout=3.0: therm_text if argv == ["pmset", "-g", "therm"] else run_quiet(argv, timeout))
    return {
        "cpu_speed_limit": therm["limits"].get("CPU_Speed_Limit", UNKNOWN)
        if isinstance(therm["limits"], dict) else UNKNOWN,
        "pmset_therm": therm,
        "thermal_pressure": level,
        "thermal_pressure_source": source,
        "power_source": parse_pmset_batt(run_quiet(["pmset", "-g", "batt"])),
        "backup_running": parse_tmutil_status(run_quiet(["tmutil", "status"], timeout=5.0)),
        "spotlight_indexing": macos.spotlight_indexing(run_quiet),
        **macos.memory_state(run_quiet),
    }


def _linux_state() -> dict[str, Any]:
    temps: dict[str, float] | str = UNKNOWN
    read = getattr(psutil, "sensors_temperatures", None)
    groups = read() if read else {}
    if groups:
        temps = {name: max(e.current for e in entries)
                 for name, entries in groups.items() if entries}
    battery = psutil.sensors_battery() if hasattr(psutil, "sensors_battery") else None
    freq = psutil.cpu_freq()
    zones = parse_thermal_zones(read_thermal_zone_files())
    return {"temperatures_c": temps or UNKNOWN, "thermal_zones": zones or UNKNOWN,
            "power_plugged": UNKNOWN if battery is None or battery.power_plugged is None
            else battery.power_plugged,
            "cpu_freq_mhz": round(freq.current) if freq else UNKNOWN}


# NVML clock-event (throttle) reason bits, as nvidia-smi reports them.
_THROTTLE_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                  0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                  0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
                  0x100: "display_clock_setting"}


def decode_throttle(mask: str) -> list[str] | str:
    try:
        bits = int(mask, 16)
    except ValueError:
        return UNKNOWN
    return [name for bit, name in _THROTTLE_BITS.items() if bits & bit]


def _clock_reasons(pynvml: Any, handle: Any) -> int:
    # Newer drivers call throttle reasons "clock events"; an older libnvidia-ml lacks that call.
    try:
        reasons: int = pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
    except pynvml.NVMLError_FunctionNotFound:
        reasons = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
    return reasons


def _nvidia_row(pynvml: Any, handle: Any) -> dict[str, Any]:
    # nvidia-smi's strings (--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,
    # clocks_event_reasons.active --format=csv,nounits), as records hold them.
    def field(call: Callable[[], Any], show: Callable[[Any], str] = str) -> str:
        return nvml_field(pynvml, call, show)

    row: dict[str, Any] = {
        "sm_clock_mhz": field(lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
        "mem_clock_mhz": field(lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
        "temperature_c": field(lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
        "power_draw_w": field(lambda: pynvml.nvmlDeviceGetPowerUsage(handle), lambda mw: f"{mw / 1000:.2f}"),
        "throttle_reasons_active": field(lambda: _clock_reasons(pynvml, handle), lambda m: f"0x{m:016x}"),
    }
    row["throttle_reasons"] = decode_throttle(row["throttle_reasons_active"])
    return row


def nvidia_state() -> list[dict[str, Any]] | str:
    """Clocks, temperature, power and clock-event reasons per NVIDIA GPU (NVML), or "unknown"
    where NVML cannot answer."""
    return nvml_devices(_nvidia_row)


def _section(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return fn()
    except Exception as exc:  # a sensor that breaks must not stop the run
        return {"error": f"{type(exc).__name__}: {exc}"}


def thermal_state() -> dict[str, Any]:
    """Thermal, power and backup state; every key present, "unknown" where unreadable."""
    out = {"cpu_speed_limit": UNKNOWN, "pmset_therm": UNKNOWN, "power_source": UNKNOWN,
           "backup_running": UNKNOWN, "temperatures_c": UNKNOWN, "thermal_zones": UNKNOWN,
           "power_plugged": UNKNOWN,
           "cpu_freq_mhz": UNKNOWN}
    if sys.platform == "darwin":
        out.update(_section(_darwin_state))
    elif sys.platform.startswith("linux"):
        out.update(_section(_linux_state))
    nv = _section(lambda: {"nvidia": nvidia_state()})
    out.update(nv)
    return out


# ---------------------------------------------------------------- thermal verdict and wait

# NVIDIA clock-event reasons that mean the GPU is slowed by heat or power, not by idling.
NVIDIA_HOT_REASONS = ("sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown",
                      "hw_power_brake_slowdown", "sw_power_cap")


def parse_thermal_zones(files: dict[str, str]) -> list[dict[str, Any]]:
    """Linux /sys/class/thermal text -> one dict per zone with a readable temperature.

    files maps paths relative to /sys/class/thermal ("thermal_zone0/temp",
    "thermal_zone0/trip_point_1_type", ...) to their text. Temperatures are millidegrees C.
    passive_c is the zone's lowest "passive" trip point (where the kernel starts throttling),
    None when it has none.
    """
    zones: dict[str, dict[str, Any]] = {}
    for path, text in files.items():
        zone, _, leaf = path.partition("/")
        if not zone.startswith("thermal_zone") or not leaf:
            continue
        zones.setdefault(zone, {"trips": {}})
        value = (text or "").strip()
        if leaf in ("type", "temp"):
            zones[zone][leaf] = value
        elif m := re.fullmatch(r"trip_point_(\d+)_(type|temp)", leaf):
            zones[zone]["trips"].setdefault(m.group(1), {})[m.group(2)] = value
    out = []
    for zone in sorted(zones, key=lambda z: (len(z), z)):
        z = zones[zone]
        try:
            temp_c = int(z.get("temp", "")) / 1000.0
        except ValueError:
            continue
        passive = []
        for trip in z["trips"].values():
            try:
                t = int(trip.get("temp", ""))
            except ValueError:
                continue
            if trip.get("type") == "passive" and t > 0:
                passive.append(t / 1000.0)
        out.append({"zone": zone, "type": z.get("type", UNKNOWN), "temp_c": temp_c,
                    "passive_c": min(passive) if passive else None})
    return out


def read_thermal_zone_files(root: str = "/sys/class/thermal") -> dict[str, str]:
    """The files parse_thermal_zones reads; {} where there are none (no zones, not Linux)."""
    out: dict[str, str] = {}
    try:
        zones = [z for z in os.listdir(root) if z.startswith("thermal_zone")]
    except OSError:
        return out
    for zone in zones:
        try:
            leaves = os.listdir(os.path.join(root, zone))
        except OSError:
            continue
        for leaf in leaves:
            if leaf in ("type", "temp") or re.fullmatch(r"trip_point_\d+_(type|temp)", leaf):
                try:
                    with open(os.path.join(root, zone, leaf), encoding="utf-8", errors="replace") as f:
                        out[f"{zone}/{leaf}"] = f.read()
                except OSError:
                    continue
    return out


def thermal_verdict(state: dict[str, Any]) -> dict[str, Any]:
    """thermal_state()'s dict -> {"checked", "nominal", "reason"}; pure.

    Not nominal: macOS CPU_Speed_Limit < 100, or a thermal pressure other than "nominal"
    (thermal_pressure: ProcessInfo.thermalState, powermetrics or pmset); an NVIDIA GPU with
    a hot clock-event reason (NVIDIA_HOT_REASONS); a Linux thermal zone at or above its lowest
    passive trip point.
    Where none of them is readable: checked False, nominal "unknown".
    """
    checked, hot, seen = False, [], []
    limit = state.get("cpu_speed_limit")
    if isinstance(limit, int) and not isinstance(limit, bool):
        checked = True
        seen.append(f"CPU_Speed_Limit {limit}")
        if limit < 100:
            hot.append(f"CPU_Speed_Limit {limit} < 100")
    rows = state.get("nvidia")
    if isinstance(rows, list):
        for i, row in enumerate(rows):
            reasons = row.get("throttle_reasons") if isinstance(row, dict) else None
            if not isinstance(reasons, list):
                continue
            checked = True
            seen.append(f"GPU {i} clock events")
            bad = [r for r in reasons if r in NVIDIA_HOT_REASONS]
            if bad:
                hot.append(f"GPU {i}: {', '.join(bad)}")
    zones = state.get("thermal_zones")
    if isinstance(zones, list):
        for z in zones:
            if not isinstance(z, dict) or z.get("passive_c") is None:
                continue
            checked = True
            seen.append(f"{z.get('zone')}")
            if z["temp_c"] >= z["passive_c"]:
                hot.append(f"{z.get('zone')} ({z.get('type')}) {z['temp_c']:g} C >= passive trip "
                           f"{z['passive_c']:g} C")
    pressure = state.get("thermal_pressure")
    if pressure in macos.LEVELS:
        checked = True
        source = state.get("thermal_pressure_source", UNKNOWN)
        seen.append(f"thermal pressure {pressure}")
        if pressure != "nominal":
            hot.append(f"thermal pressure {pressure} ({source})")
    if not checked:
        return {"checked": False, "nominal": UNKNOWN, "reason": "no thermal state readable"}
    if hot:
        return {"checked": True, "nominal": False, "reason": "; ".join(hot)}
    return {"checked": True, "nominal": True, "reason": "nominal (" + ", ".join(seen) + ")"}


_RECENT: dict[str, Any] = {}


def recent_thermal_state(max_age_s: float = 2.0, clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """thermal_state(), reusing a nominal reading younger than max_age_s: a reading costs an
    NVML session or a pmset process, about as long as a short run. A reading that is not nominal is
    never reused; a reused one says how old it is ("reused_age_s")."""
    now = clock()
    got = _RECENT.get("state")
    if got is not None and now - _RECENT["at"] < max_age_s and thermal_verdict(got)["nominal"] is not False:
        return {**got, "reused_age_s": round(now - _RECENT["at"], 3)}
    state = thermal_state()
    _RECENT.update(state=state, at=now)
    return state


def wait_thermal(limit_s: float, *, read: Callable[[], dict[str, Any]] | None = None, wait: bool = True,
                 poll_s: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 on_tick: Callable[[float, str], None] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read thermal state; while it is readable and not nominal, poll every poll_s up to
    limit_s. Returns (thermal_wait, the last thermal_state() read). wait=False: one read.

    thermal_wait: {"checked", "nominal", "reason", "waited_s", "reads"}.
    """
    read = read or thermal_state
    start = clock()
    state = read()
    verdict, reads = thermal_verdict(state), 1
    while wait and verdict["nominal"] is False and (elapsed := clock() - start) < limit_s:
        if on_tick is not None:
            on_tick(elapsed, verdict["reason"])
        sleep(min(poll_s, max(0.0, limit_s - elapsed)))
        state = read()
        verdict, reads = thermal_verdict(state), reads + 1
    waited = clock() - start if reads > 1 else 0.0
    return {**verdict, "waited_s": round(waited, 3), "reads": reads}, state
