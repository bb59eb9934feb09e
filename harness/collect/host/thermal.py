"""Thermal, power and backup state, its verdict, and the wait until it reads nominal: pmset and
tmutil on macOS with macos.py's thermal pressure, memory, swap and Spotlight readings, Linux
thermal zones, NVIDIA clocks and throttle reasons."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

import msgspec
import psutil

from harness.collect.host import macos
from harness.collect.host.info import UNKNOWN, nvml_devices, nvml_field, run_quiet
from harness.core.hostinfo import NvidiaState, PmsetTherm, ThermalState, ThermalWait, ThermalZone

# ---------------------------------------------------------------- thermal / power / backup

def parse_pmset_therm(text: str | None) -> PmsetTherm:
    """`pmset -g therm` "CPU_Speed_Limit = 100" lines -> limits {key: int}; recorded warning
    levels ("Thermal Warning Level = 5") as lines. Its "Note: No ... has been recorded" lines say
    that nothing was published (Apple silicon, mostly): they are no warning."""
    if text is None:
        return PmsetTherm(limits=UNKNOWN, warnings=UNKNOWN)
    limits = {m.group(1): int(m.group(2))
              for m in re.finditer(r"^\s*(\w+)\s*=\s*(\d+)\s*$", text, re.MULTILINE)}
    warns = [ln.strip() for ln in text.splitlines()
             if "warning level" in ln.lower() and not _NOT_RECORDED.match(ln)]
    return PmsetTherm(limits=limits or UNKNOWN, warnings=warns)


_NOT_RECORDED = re.compile(r"\s*Note: No .* has been recorded", re.IGNORECASE)


def parse_pmset_batt(text: str | None) -> str:
    m = re.search(r"drawing from '([^']+)'", text or "")
    return m.group(1) if m else UNKNOWN


def parse_tmutil_status(text: str | None) -> bool | str:
    m = re.search(r"\bRunning\s*=\s*(\d+)", text or "")
    return (m.group(1) == "1") if m else UNKNOWN


def _darwin_state(st: ThermalState) -> None:
    therm_text = run_quiet(["pmset", "-g", "therm"])
    therm = parse_pmset_therm(therm_text)
    # pmset's answer serves the pressure's last fallback too: one pmset process, not two.
    level, source = macos.thermal_pressure(
        lambda argv, timeout=3.0: therm_text if argv == ["pmset", "-g", "therm"] else run_quiet(argv, timeout))
    st.cpu_speed_limit = therm.limits.get("CPU_Speed_Limit", UNKNOWN) if isinstance(therm.limits, dict) else UNKNOWN
    st.pmset_therm = therm
    st.thermal_pressure, st.thermal_pressure_source = level, source
    st.power_source = parse_pmset_batt(run_quiet(["pmset", "-g", "batt"]))
    st.backup_running = parse_tmutil_status(run_quiet(["tmutil", "status"], timeout=5.0))
    st.spotlight_indexing = macos.spotlight_indexing(run_quiet)
    memory = macos.memory_state(run_quiet)
    st.memory_pressure, st.swap_used_bytes = memory.memory_pressure, memory.swap_used_bytes


def _linux_state(st: ThermalState) -> None:
    temps: dict[str, float] | str = UNKNOWN
    read = getattr(psutil, "sensors_temperatures", None)
    groups = read() if read else {}
    if groups:
        temps = {name: max(e.current for e in entries)
                 for name, entries in groups.items() if entries}
    battery = psutil.sensors_battery() if hasattr(psutil, "sensors_battery") else None
    freq = psutil.cpu_freq()
    zones = parse_thermal_zones(read_thermal_zone_files())
    st.temperatures_c = temps or UNKNOWN
    st.thermal_zones = zones or UNKNOWN
    st.power_plugged = UNKNOWN if battery is None or battery.power_plugged is None else battery.power_plugged
    st.cpu_freq_mhz = round(freq.current) if freq else UNKNOWN


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


def _nvidia_row(pynvml: Any, handle: Any) -> NvidiaState:
    # nvidia-smi's strings (--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,
    # clocks_event_reasons.active --format=csv,nounits), as records hold them.
    def field(call: Callable[[], Any], show: Callable[[Any], str] = str) -> str:
        return nvml_field(pynvml, call, show)

    active = field(lambda: _clock_reasons(pynvml, handle), lambda m: f"0x{m:016x}")
    return NvidiaState(
        sm_clock_mhz=field(lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
        mem_clock_mhz=field(lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
        temperature_c=field(lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
        power_draw_w=field(lambda: pynvml.nvmlDeviceGetPowerUsage(handle), lambda mw: f"{mw / 1000:.2f}"),
        throttle_reasons_active=active,
        throttle_reasons=decode_throttle(active))


def nvidia_state() -> list[NvidiaState] | str:
    """Clocks, temperature, power and clock-event reasons per NVIDIA GPU (NVML), or "unknown"
    where NVML cannot answer."""
    return nvml_devices(_nvidia_row)


def _section(st: ThermalState, fill: Callable[[ThermalState], None]) -> ThermalState:
    """st with fill's readings, all of them or none: a sensor that breaks must not stop the run,
    and its section says why in `error`."""
    trial = msgspec.structs.replace(st)
    try:
        fill(trial)
    except Exception as exc:
        st.error = f"{type(exc).__name__}: {exc}"
        return st
    return trial


def _nvidia(st: ThermalState) -> None:
    st.nvidia = nvidia_state()


def thermal_state() -> ThermalState:
    """Thermal, power and backup state; every field present, "unknown" where unreadable."""
    out = ThermalState()
    if sys.platform == "darwin":
        out = _section(out, _darwin_state)
    elif sys.platform.startswith("linux"):
        out = _section(out, _linux_state)
    return _section(out, _nvidia)


# ---------------------------------------------------------------- thermal verdict and wait

# NVIDIA clock-event reasons that mean the GPU is slowed by heat or power, not by idling.
NVIDIA_HOT_REASONS = ("sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown",
                      "hw_power_brake_slowdown", "sw_power_cap")


@dataclass
class _Trip:
    type: str | None = None
    temp: str | None = None


@dataclass
class _ZoneFiles:
    """One zone's files as read: its type, temperature and trip points (by number)."""
    type: str | None = None
    temp: str | None = None
    trips: dict[str, _Trip] = field(default_factory=dict)


def _int(text: str | None) -> int | None:
    try:
        return int(text or "")
    except ValueError:
        return None


def parse_thermal_zones(files: dict[str, str]) -> list[ThermalZone]:
    """Linux /sys/class/thermal text -> one dict per zone with a readable temperature.

    files maps paths relative to /sys/class/thermal ("thermal_zone0/temp",
    "thermal_zone0/trip_point_1_type", ...) to their text. Temperatures are millidegrees C.
    passive_c is the zone's lowest "passive" trip point (where the kernel starts throttling),
    None when it has none.
    """
    zones: dict[str, _ZoneFiles] = {}
    for path, text in files.items():
        zone, _, leaf = path.partition("/")
        if not zone.startswith("thermal_zone") or not leaf:
            continue
        z = zones.setdefault(zone, _ZoneFiles())
        value = (text or "").strip()
        if leaf == "type":
            z.type = value
        elif leaf == "temp":
            z.temp = value
        elif m := re.fullmatch(r"trip_point_(\d+)_(type|temp)", leaf):
            trip = z.trips.setdefault(m.group(1), _Trip())
            if m.group(2) == "type":
                trip.type = value
            else:
                trip.temp = value
    out = []
    for zone in sorted(zones, key=lambda z: (len(z), z)):
        z = zones[zone]
        millideg = _int(z.temp)
        if millideg is None:
            continue
        passive = [t / 1000.0 for trip in z.trips.values()
                   if (t := _int(trip.temp)) is not None and trip.type == "passive" and t > 0]
        out.append(ThermalZone(zone=zone, type=UNKNOWN if z.type is None else z.type,
                               temp_c=millideg / 1000.0, passive_c=min(passive) if passive else None))
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


@dataclass(frozen=True)
class ThermalVerdict:
    """Whether the thermal state could be read (checked), and whether it reads nominal and why."""
    checked: bool
    nominal: bool | str           # "unknown" where nothing was readable
    reason: str


def as_thermal(state: ThermalState | Mapping[str, Any]) -> ThermalState:
    """A thermal reading (a run's load.thermal as recorded) as a ThermalState; one passes through."""
    return state if isinstance(state, ThermalState) else msgspec.convert(state, ThermalState)


def thermal_verdict(state: ThermalState | Mapping[str, Any]) -> ThermalVerdict:
    """thermal_state()'s reading -> whether it was checked, is nominal, and why; pure.

    Not nominal: macOS CPU_Speed_Limit < 100, or a thermal pressure other than "nominal"
    (thermal_pressure: ProcessInfo.thermalState, powermetrics or pmset); an NVIDIA GPU with
    a hot clock-event reason (NVIDIA_HOT_REASONS); a Linux thermal zone at or above its lowest
    passive trip point.
    Where none of them is readable: checked False, nominal "unknown".
    """
    st = as_thermal(state)
    checked, hot, seen = False, [], []
    limit = st.cpu_speed_limit
    if isinstance(limit, int) and not isinstance(limit, bool):
        checked = True
        seen.append(f"CPU_Speed_Limit {limit}")
        if limit < 100:
            hot.append(f"CPU_Speed_Limit {limit} < 100")
    if isinstance(st.nvidia, list):
        for i, row in enumerate(st.nvidia):
            if not isinstance(row.throttle_reasons, list):
                continue
            checked = True
            seen.append(f"GPU {i} clock events")
            bad = [r for r in row.throttle_reasons if r in NVIDIA_HOT_REASONS]
            if bad:
                hot.append(f"GPU {i}: {', '.join(bad)}")
    if isinstance(st.thermal_zones, list):
        for z in st.thermal_zones:
            if z.passive_c is None:
                continue
            checked = True
            seen.append(z.zone)
            if z.temp_c >= z.passive_c:
                hot.append(f"{z.zone} ({z.type}) {z.temp_c:g} C >= passive trip {z.passive_c:g} C")
    pressure = st.thermal_pressure
    if pressure in macos.LEVELS:
        checked = True
        source = st.thermal_pressure_source or UNKNOWN
        seen.append(f"thermal pressure {pressure}")
        if pressure != "nominal":
            hot.append(f"thermal pressure {pressure} ({source})")
    if not checked:
        return ThermalVerdict(checked=False, nominal=UNKNOWN, reason="no thermal state readable")
    if hot:
        return ThermalVerdict(checked=True, nominal=False, reason="; ".join(hot))
    return ThermalVerdict(checked=True, nominal=True, reason="nominal (" + ", ".join(seen) + ")")


@dataclass
class _Recent:
    """The last thermal reading and when it was taken (a monotonic clock)."""
    state: ThermalState | None = None
    at: float = 0.0

    def clear(self) -> None:
        """Forget the last reading: the next one is read afresh."""
        self.state, self.at = None, 0.0


_RECENT = _Recent()


def recent_thermal_state(max_age_s: float = 2.0, clock: Callable[[], float] = time.monotonic) -> ThermalState:
    """thermal_state(), reusing a nominal reading younger than max_age_s: a reading costs an
    NVML session or a pmset process, about as long as a short run. A reading that is not nominal is
    never reused; a reused one says how old it is (`reused_age_s`)."""
    now = clock()
    got = _RECENT.state
    if got is not None and now - _RECENT.at < max_age_s and thermal_verdict(got).nominal is not False:
        return msgspec.structs.replace(got, reused_age_s=round(now - _RECENT.at, 3))
    state = thermal_state()
    _RECENT.state, _RECENT.at = state, now
    return state


def wait_thermal(limit_s: float, *, read: Callable[[], ThermalState | Mapping[str, Any]] | None = None,
                 wait: bool = True, poll_s: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 on_tick: Callable[[float, str], None] | None = None) -> tuple[ThermalWait, ThermalState]:
    """Read thermal state; while it is readable and not nominal, poll every poll_s up to
    limit_s. Returns (the run's thermal_wait, the last thermal_state() read). wait=False: one read.
    """
    read = read or thermal_state
    start = clock()
    state = as_thermal(read())
    verdict, reads = thermal_verdict(state), 1
    while wait and verdict.nominal is False and (elapsed := clock() - start) < limit_s:
        if on_tick is not None:
            on_tick(elapsed, verdict.reason)
        sleep(min(poll_s, max(0.0, limit_s - elapsed)))
        state = as_thermal(read())
        verdict, reads = thermal_verdict(state), reads + 1
    waited = clock() - start if reads > 1 else 0.0
    return ThermalWait(checked=verdict.checked, nominal=verdict.nominal, reason=verdict.reason,
                       waited_s=round(waited, 3), reads=reads), state
