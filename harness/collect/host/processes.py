"""Per-process CPU readings: who is using the CPU, named once after a busy reading.

A scan of every process costs ~10 ms and holds the GIL while an in-process engine runs, so
the quiet wait and the contention watch (harness.collect.host.quiet) read the cheap host total
(harness.collect.host.load) and call on this module only to name the offenders.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

import msgspec
import psutil

from harness.collect.host.info import run_quiet
from harness.core.hostinfo import Offender

# ---------------------------------------------------------------- per-process sampling

@dataclass(frozen=True)
class Reading:
    pid: int
    name: str
    cpu_pct: float
    source: str = "psutil"

    def as_dict(self) -> dict[str, Any]:
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

    def __init__(self, exclude_pids: Iterable[int] | None = None, root_pid: int | None = None) -> None:
        self.exclude_pids = set(exclude_pids or ())
        self.own_pid = os.getpid() if root_pid is None else root_pid   # whose tree is ours
        self.denied = 0  # processes whose CPU time we could not read in the last sample
        self._procs: dict[int, psutil.Process] = {}

    def prime(self) -> None:
        self.sample()

    def _read(self, pid: int) -> tuple[int, str, float | None]:
        """(ppid, name, pct or None for a fresh baseline); raises NoSuchProcess when gone,
        AccessDenied when not ours to read."""
        proc = self._procs.get(pid)
        fresh = proc is None
        if proc is None:
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
        self.offenders: dict[int, Offender] = {}

    def add(self, readings: list[Reading]) -> Reading | None:
        top = max(readings, key=lambda r: r.cpu_pct, default=None)
        if top is not None and (self.busiest is None or top.cpu_pct > self.busiest.cpu_pct):
            self.busiest = top
        for r in readings:
            if r.cpu_pct >= self.threshold_pct:
                o = self.offenders.setdefault(r.pid, Offender(pid=r.pid, name=r.name))
                o.max_cpu_pct = round(max(o.max_cpu_pct, r.cpu_pct), 1)
                o.samples_over += 1
        return top

    def summary(self, limit: int = 5) -> dict[str, Any]:
        worst = sorted(self.offenders.values(), key=lambda o: -o.max_cpu_pct)[:limit]
        return {"busiest": self.busiest.as_dict() if self.busiest else None,
                "offenders": [msgspec.to_builtins(o) for o in worst]}


class Namer:
    """Names the foreign processes behind a busy reading with one per-process scan.

    The first busy sample primes a ProcessSampler (its first reading of a pid is only a
    baseline); the first sample at least min_window_s later, or finish(), reads it. Once per
    quiet wait or watch, so a busy host costs two ~10 ms scans, and a quiet one none.
    """

    def __init__(self, threshold_pct: float, min_window_s: float,
                 make: Callable[[], Any]) -> None:
        self.tally = _Tally(threshold_pct)
        self.min_window_s = min_window_s
        self._make = make
        self._sampler: Any = None
        self._primed_at: float | None = None
        self.window_s: float | None = None
        self.denied = 0
        self.top: list[dict[str, Any]] = []

    def on_sample(self, busy: bool, now: float) -> None:
        if self.window_s is not None:
            return
        if self._sampler is None:
            if busy:
                self._sampler = self._make()
                self._sampler.prime()
                self._primed_at = now
        elif now - (self._primed_at or now) >= self.min_window_s:
            self._read(now)

    def finish(self, now: float) -> None:
        if self._sampler is not None and self.window_s is None:
            self._read(now)

    def _read(self, now: float) -> None:
        readings = list(self._sampler.sample())
        self.tally.add(readings)
        self.top = [r.as_dict() for r in sorted(readings, key=lambda r: -r.cpu_pct)[:5]]
        self.window_s = round(max(0.0, now - (self._primed_at or now)), 3)
        self.denied = getattr(self._sampler, "denied", 0)

    def result(self) -> dict[str, Any]:
        return {**self.tally.summary(), "named": self.window_s is not None,
                "naming_window_s": self.window_s, "top_processes": self.top,
                "unreadable_processes": self.denied}


