"""Load around a run: snapshots, a quiet gate before it, a contention watch during it, and
thermal / power / backup state.

Background load (indexers, backups, another job) slows every arm together and a thermal
reading does not see it, so the runner waits until the busiest *foreign* process is quiet and
watches for one during the run. Foreign means: not this process, not its descendants (the
engine under test may be a child) and not its parent chain (the shell or CI agent that
started the harness), nor any pid the caller names.

CPU percentages of a process are of one core, as `top` shows them (a busy loop reads ~100).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable

import psutil

from harness.hostinfo import UNKNOWN, parse_csv_rows, run_quiet

# ---------------------------------------------------------------- load snapshot

_last_cpu_times: Any = None
_last_cpu_clock: float = 0.0


def _total(t: Any) -> float:
    # Linux counts guest time inside user/nice as well; psutil subtracts it the same way.
    return sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)


def _busy_pct(before: Any, after: Any) -> float:
    total = _total(after) - _total(before)
    idle = sum(getattr(after, k, 0.0) - getattr(before, k, 0.0) for k in ("idle", "iowait"))
    return round(max(0.0, min(100.0, 100.0 * (total - idle) / total)), 1) if total > 0 else 0.0


def load_snapshot() -> dict:
    """Load averages and overall CPU percent since the previous snapshot.

    Our own cpu_times baseline (not psutil.cpu_percent's shared one) so other callers in
    the process cannot shorten the window; the first call measures a 0.1 s window.
    """
    global _last_cpu_times, _last_cpu_clock
    if _last_cpu_times is None:
        _last_cpu_times, _last_cpu_clock = psutil.cpu_times(), time.monotonic()
        time.sleep(0.1)
    now_times, now_clock = psutil.cpu_times(), time.monotonic()
    pct = _busy_pct(_last_cpu_times, now_times)
    window = now_clock - _last_cpu_clock
    _last_cpu_times, _last_cpu_clock = now_times, now_clock
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        one = five = fifteen = UNKNOWN
    return {"timestamp": time.time(), "loadavg_1": one, "loadavg_5": five, "loadavg_15": fifteen,
            "cpu_pct": pct, "cpu_pct_window_s": round(window, 3)}


# ---------------------------------------------------------------- per-process sampling

@dataclass(frozen=True)
class Reading:
    pid: int
    name: str
    cpu_pct: float
    source: str = "psutil"

    def as_dict(self) -> dict:
        return {"pid": self.pid, "name": self.name, "cpu_pct": round(self.cpu_pct, 1),
                "source": self.source}


def parse_ps(text: str) -> dict[int, tuple[int, float, str]]:
    """`ps -A -o pid=,ppid=,pcpu=,comm=` -> {pid: (ppid, pcpu, name)}."""
    out = {}
    for line in text.splitlines():
        parts = line.split(None, 3)
        if len(parts) < 4:
            continue
        try:
            out[int(parts[0])] = (int(parts[1]), float(parts[2]), os.path.basename(parts[3]))
        except ValueError:
            continue
    return out


class ProcessSampler:
    """CPU percent of every foreign process since the previous sample.

    Keeps one psutil.Process per pid, because cpu_percent(interval=None) measures since the
    previous call on the same object; a pid's first reading is only a baseline and is skipped.
    """

    def __init__(self, exclude_pids: Iterable[int] | None = None) -> None:
        self.exclude_pids = set(exclude_pids or ())
        self.own_pid = os.getpid()
        self.denied = 0  # processes whose CPU time we could not read in the last sample
        self._procs: dict[int, psutil.Process] = {}

    def prime(self) -> None:
        self.sample()

    def _read(self, pid: int) -> tuple[int, str, float | None] | None:
        """(ppid, name, pct or None for a fresh baseline); None when gone; raises AccessDenied."""
        proc = self._procs.get(pid)
        fresh = proc is None
        if fresh:
            proc = psutil.Process(pid)
            self._procs[pid] = proc
        with proc.oneshot():
            ppid, name = proc.ppid(), proc.name()
            pct = proc.cpu_percent(interval=None)
        return ppid, name, (None if fresh else max(0.0, pct))

    def _excluded(self, ppids: dict[int, int]) -> set[int]:
        """This process, its descendants and its parent chain, plus the caller's pids."""
        chain = {self.own_pid}
        pid = self.own_pid
        while pid in ppids and ppids[pid] > 0 and ppids[pid] not in chain:
            pid = ppids[pid]
            chain.add(pid)
        out = chain | self.exclude_pids | _descendants(self.own_pid, ppids)
        if sys.platform == "win32":
            out.add(0)  # "System Idle Process" reads as busy when the host is idle
        return out

    def sample(self) -> list[Reading]:
        ppids: dict[int, int] = {}
        readings: dict[int, Reading] = {}
        denied: list[int] = []
        pids = set(psutil.pids())
        for pid in list(self._procs):
            if pid not in pids:
                del self._procs[pid]
        for pid in pids:
            try:
                got = self._read(pid)
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                self._procs.pop(pid, None)
                continue
            except psutil.AccessDenied:
                self._procs.pop(pid, None)
                denied.append(pid)
                continue
            ppid, name, pct = got
            ppids[pid] = ppid
            if pct is not None:
                readings[pid] = Reading(pid, name, pct)
        readings.update(self._ps_fallback(denied, ppids))
        excluded = self._excluded(ppids)
        self.denied = len([p for p in denied if p not in readings])
        return [r for pid, r in readings.items() if pid not in excluded]

    def _ps_fallback(self, denied: list[int], ppids: dict[int, int]) -> dict[int, Reading]:
        # macOS denies other users' CPU times (Spotlight, backupd run as root); ps can still
        # read them, as a decaying average rather than a windowed reading.
        if not denied:
            return {}
        table = parse_ps(run_quiet(["ps", "-A", "-o", "pid=,ppid=,pcpu=,comm="], timeout=2.0) or "")
        out = {}
        for pid in denied:
            if pid in table:
                ppid, pct, name = table[pid]
                ppids[pid] = ppid
                out[pid] = Reading(pid, name, pct, source="ps")
        return out


def _descendants(root: int, ppids: dict[int, int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in ppids.items():
        children.setdefault(ppid, []).append(pid)
    out, stack = set(), [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in out:
                out.add(child)
                stack.append(child)
    return out


class _Tally:
    """Busiest reading seen and the processes that went over the threshold."""

    def __init__(self, threshold_pct: float) -> None:
        self.threshold_pct = threshold_pct
        self.busiest: Reading | None = None
        self.offenders: dict[int, dict] = {}

    def add(self, readings: list[Reading]) -> Reading | None:
        top = max(readings, key=lambda r: r.cpu_pct, default=None)
        if top is not None and (self.busiest is None or top.cpu_pct > self.busiest.cpu_pct):
            self.busiest = top
        for r in readings:
            if r.cpu_pct >= self.threshold_pct:
                o = self.offenders.setdefault(r.pid, {"pid": r.pid, "name": r.name,
                                                      "max_cpu_pct": 0.0, "samples_over": 0})
                o["max_cpu_pct"] = round(max(o["max_cpu_pct"], r.cpu_pct), 1)
                o["samples_over"] += 1
        return top

    def summary(self, limit: int = 5) -> dict:
        worst = sorted(self.offenders.values(), key=lambda o: -o["max_cpu_pct"])[:limit]
        return {"busiest": self.busiest.as_dict() if self.busiest else None, "offenders": worst}


# ---------------------------------------------------------------- quiet gate

class QuietGate:
    """Block until the busiest foreign process stays under threshold_pct for settle_s."""

    def __init__(self, threshold_pct: float = 15.0, settle_s: float = 3.0,
                 timeout_s: float = 120.0, interval_s: float = 0.5,
                 exclude_pids: Iterable[int] | None = None, *,
                 sampler: ProcessSampler | None = None) -> None:
        self.threshold_pct = threshold_pct
        self.settle_s = settle_s
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        # sampler: a seam for tests; the default reads the real process table.
        self.sampler = sampler or ProcessSampler(exclude_pids)

    def wait(self) -> dict:
        tally = _Tally(self.threshold_pct)
        self.sampler.prime()
        start = quiet_since = time.monotonic()
        while True:
            time.sleep(self.interval_s)
            top = tally.add(self.sampler.sample())
            now = time.monotonic()
            if top is not None and top.cpu_pct >= self.threshold_pct:
                quiet_since = now
            elif now - quiet_since >= self.settle_s:
                return self._result(tally, now - start, timed_out=False)
            if now - start >= self.timeout_s:
                return self._result(tally, now - start, timed_out=True)

    def _result(self, tally: _Tally, waited: float, timed_out: bool) -> dict:
        return {"waited_s": round(waited, 3), "timed_out": timed_out, **tally.summary(),
                "threshold_pct": self.threshold_pct, "settle_s": self.settle_s,
                "timeout_s": self.timeout_s, "unreadable_processes": self.sampler.denied}


# ---------------------------------------------------------------- contention watch

class ContentionWatch:
    """Sample foreign processes in a background thread while the `with` body runs."""

    _MIN_WINDOW_S = 0.05  # below a few clock ticks a per-process percentage is noise

    def __init__(self, threshold_pct: float = 15.0, interval_s: float = 0.25,
                 exclude_pids: Iterable[int] | None = None, *,
                 sampler: ProcessSampler | None = None) -> None:
        self.threshold_pct = threshold_pct
        self.interval_s = interval_s
        self.sampler = sampler or ProcessSampler(exclude_pids)
        self._tally = _Tally(threshold_pct)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = 0
        self.contended_samples = 0
        self._started = self._finished = 0.0
        self._watch_cpu_s = 0.0

    def __enter__(self) -> "ContentionWatch":
        self.sampler.prime()  # synchronously, so the first interval is already measured
        self._started = self._last = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="contention-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._finished = time.monotonic()

    def _take(self) -> None:
        top = self._tally.add(self.sampler.sample())
        self._last = time.monotonic()
        self.samples += 1
        if top is not None and top.cpu_pct >= self.threshold_pct:
            self.contended_samples += 1

    def _loop(self) -> None:
        cpu0 = time.thread_time()
        while not self._stop.wait(self.interval_s):
            self._take()
        # Cover the tail of the run, but never from a window too short to mean anything.
        tail = time.monotonic() - self._last
        if self.samples == 0 and tail < self._MIN_WINDOW_S:
            time.sleep(self._MIN_WINDOW_S - tail)
            tail = self._MIN_WINDOW_S
        if self.samples == 0 or tail >= self.interval_s / 2:
            self._take()
        # The watcher competes with the run for CPU; report what it spent.
        self._watch_cpu_s = time.thread_time() - cpu0

    def result(self) -> dict:
        frac = self.contended_samples / self.samples if self.samples else None
        return {"samples": self.samples, "contended_samples": self.contended_samples,
                "contended_fraction": round(frac, 4) if frac is not None else None,
                **self._tally.summary(), "threshold_pct": self.threshold_pct,
                "interval_s": self.interval_s,
                "duration_s": round((self._finished or time.monotonic()) - self._started, 3),
                "watch_cpu_s": round(self._watch_cpu_s, 4),
                "unreadable_processes": self.sampler.denied}


# ---------------------------------------------------------------- thermal / power / backup

def parse_pmset_therm(text: str | None) -> dict:
    """`pmset -g therm` "CPU_Speed_Limit = 100" lines -> {key: int}; warnings as lines."""
    if text is None:
        return {"limits": UNKNOWN, "warnings": UNKNOWN}
    limits = {m.group(1): int(m.group(2))
              for m in re.finditer(r"^\s*(\w+)\s*=\s*(\d+)\s*$", text, re.MULTILINE)}
    warns = [ln.strip() for ln in text.splitlines() if "warning level" in ln.lower()]
    return {"limits": limits or UNKNOWN, "warnings": warns}


def parse_pmset_batt(text: str | None) -> str:
    m = re.search(r"drawing from '([^']+)'", text or "")
    return m.group(1) if m else UNKNOWN


def parse_tmutil_status(text: str | None) -> bool | str:
    m = re.search(r"\bRunning\s*=\s*(\d+)", text or "")
    return (m.group(1) == "1") if m else UNKNOWN


def _darwin_state() -> dict:
    therm = parse_pmset_therm(run_quiet(["pmset", "-g", "therm"]))
    return {
        "cpu_speed_limit": therm["limits"].get("CPU_Speed_Limit", UNKNOWN)
        if isinstance(therm["limits"], dict) else UNKNOWN,
        "pmset_therm": therm,
        "power_source": parse_pmset_batt(run_quiet(["pmset", "-g", "batt"])),
        "backup_running": parse_tmutil_status(run_quiet(["tmutil", "status"], timeout=5.0)),
    }


def _linux_state() -> dict:
    temps: dict | str = UNKNOWN
    read = getattr(psutil, "sensors_temperatures", None)
    groups = read() if read else {}
    if groups:
        temps = {name: max(e.current for e in entries)
                 for name, entries in groups.items() if entries}
    battery = psutil.sensors_battery() if hasattr(psutil, "sensors_battery") else None
    freq = psutil.cpu_freq()
    return {"temperatures_c": temps or UNKNOWN,
            "power_plugged": UNKNOWN if battery is None or battery.power_plugged is None
            else battery.power_plugged,
            "cpu_freq_mhz": round(freq.current) if freq else UNKNOWN}


# NVML clock-event (throttle) reason bits, as nvidia-smi reports them.
_THROTTLE_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                  0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                  0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
                  0x100: "display_clock_setting"}
_NV_STATE_KEYS = ["sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_draw_w",
                  "throttle_reasons_active"]


def decode_throttle(mask: str) -> list[str] | str:
    try:
        bits = int(mask, 16)
    except ValueError:
        return UNKNOWN
    return [name for bit, name in _THROTTLE_BITS.items() if bits & bit]


def nvidia_state() -> list[dict] | str:
    fields = "clocks.sm,clocks.mem,temperature.gpu,power.draw,{}"
    out = None
    # Newer drivers call throttle reasons "clocks_event_reasons"; try the old name first.
    for reasons in ("clocks_throttle_reasons.active", "clocks_event_reasons.active"):
        out = run_quiet(["nvidia-smi", "--query-gpu=" + fields.format(reasons),
                         "--format=csv,noheader,nounits"])
        if out is not None:
            break
    if out is None:
        return UNKNOWN
    rows = parse_csv_rows(out, _NV_STATE_KEYS)
    for row in rows:
        row["throttle_reasons"] = decode_throttle(row["throttle_reasons_active"])
    return rows


def _section(fn) -> dict:
    try:
        return fn()
    except Exception as exc:  # a sensor that breaks must not stop the run
        return {"error": f"{type(exc).__name__}: {exc}"}


def thermal_state() -> dict:
    """Thermal, power and backup state; every key present, "unknown" where unreadable."""
    out = {"cpu_speed_limit": UNKNOWN, "pmset_therm": UNKNOWN, "power_source": UNKNOWN,
           "backup_running": UNKNOWN, "temperatures_c": UNKNOWN, "power_plugged": UNKNOWN,
           "cpu_freq_mhz": UNKNOWN}
    if sys.platform == "darwin":
        out.update(_section(_darwin_state))
    elif sys.platform.startswith("linux"):
        out.update(_section(_linux_state))
    nv = _section(lambda: {"nvidia": nvidia_state()})
    out.update(nv)
    return out
