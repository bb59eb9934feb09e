"""Load around a run: snapshots, a quiet gate before it, a contention watch during it, and
thermal / power / backup state.

Background load (indexers, backups, another job) slows every arm together and a thermal
reading does not see it, so the runner waits until *foreign* CPU use is low and watches for
it during the run. Foreign means: not this process, not its descendants (the engine under
test may be a child) and not its parent chain (the shell or CI agent that started the
harness), nor any pid the caller names.

Foreign CPU is measured the cheap way (ForeignCpuSampler): all busy CPU time on the host,
from psutil.cpu_times(), minus the CPU time of this process, its descendants and its parent
chain, over a wall-clock window. One reading costs a few reads of /proc (about 0.1 ms), where
a scan of every process (ProcessSampler) costs ~10 ms and holds the GIL while an in-process
engine runs. The per-process scan is done only to *name* the offenders, once, after a busy
reading. Because the total counts everything, short-lived processes (a build spawning
compilers) are seen too, which a per-process scan misses.

A quiet-gate or watch sample is busy (contended) when the foreign total is at or over
threshold_pct per 4 cores (busy_threshold: 15% on a 2-core host, 60% on 16 cores, where the
kernel's own threads serving our GPU work read 30-40% in total and compete with nothing): the
sum over all foreign processes, not the busiest one. CPU time is counted in
clock ticks (1/100 s), each field truncated on its own, so a reading covers a window of at
least min_window_for(threshold_pct) (0.27 s at 15 %), reaching back into the sampler's recent
readings when samples come faster: the counters' worst rounding (RESOLUTION_TICKS ticks) then
reads as at most the threshold. Steal time (a hypervisor running another guest) counts as
foreign.

CPU percentages are of one core, as `top` shows them (a busy loop reads ~100; two read ~200).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

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


# ---------------------------------------------------------------- foreign CPU, the cheap way

CLOCK_TICK_S = 0.01   # /proc/stat and per-process times count in 1/100 s (USER_HZ, CLK_TCK)
# Worst rounding of one reading's difference, in ticks: the host's user and system counters
# and a child engine's are each truncated to a tick. Measured with a busy child on an idle
# host: 0.1 s windows read up to 16 % foreign, 0.2 s up to 11 %, 0.3 s up to 6 %.
RESOLUTION_TICKS = 4


def min_window_for(threshold_pct: float, tick_s: float = CLOCK_TICK_S) -> float:
    """Shortest window a foreign-CPU reading may cover for this threshold: the counters' worst
    rounding must read as at most threshold_pct (0.27 s at 15 %)."""
    return max(0.1, RESOLUTION_TICKS * tick_s * 100.0 / max(threshold_pct, 1e-9))


def busy_threshold(threshold_pct: float, cpus: int | None = None) -> float:
    """The foreign total that makes a sample busy: threshold_pct per 4 cores, at least threshold_pct."""
    n = cpus if cpus is not None else (os.cpu_count() or 1)
    return threshold_pct * max(1.0, n / 4.0)


def over_threshold(s: "ForeignSample", threshold_pct: float, min_window_s: float,
                   tick_s: float = CLOCK_TICK_S) -> bool:
    """Busy: foreign CPU at or over threshold_pct. A reading over a window shorter than
    min_window_s (a fresh sampler) must clear it by the counters' worst rounding as well, so
    counter resolution alone never makes it busy."""
    if s.window_s <= 0:
        return False
    margin = 100.0 * RESOLUTION_TICKS * tick_s / s.window_s if s.window_s < min_window_s - 1e-9 else 0.0
    return s.foreign_pct >= threshold_pct + margin


@dataclass(frozen=True)
class ForeignSample:
    """One reading of foreign CPU use over the window that ends now."""
    foreign_pct: float      # all busy CPU time minus our tree's, percent of one core (>= 0)
    window_s: float         # wall-clock window it covers; 0.0 when there was no earlier reading
    busy_pct: float = 0.0   # all busy CPU time on the host, percent of one core
    own_pct: float = 0.0    # this process, its descendants, its parent chain, excluded pids

    def as_dict(self) -> dict:
        return {"foreign_pct": round(self.foreign_pct, 1), "window_s": round(self.window_s, 4),
                "busy_pct": round(self.busy_pct, 1), "own_pct": round(self.own_pct, 1)}


def _busy_s(t: Any) -> float:
    return _total(t) - getattr(t, "idle", 0.0) - getattr(t, "iowait", 0.0)


def _children_files_work(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}/task/{pid}/children")


def _linux_children(pid: int) -> list[int]:
    """Direct children of every thread of pid, from /proc/PID/task/TID/children (cheap)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                out.extend(int(x) for x in f.read().split())
        except (OSError, ValueError):
            continue
    return out


class ForeignCpuSampler:
    """Foreign CPU percent from two counters: the host's busy CPU time and our tree's.

    Our tree is this process (time.process_time, plus reaped children through getrusage), its
    live descendants (their own and their reaped children's time) and its parent chain, plus
    the caller's exclude_pids. A reaped child's time moves into its parent's children fields,
    so the tree's total carries on without a jump when a child exits.

    sample() measures against the newest earlier reading at least min_window_s old (or the
    oldest one kept), so samples may come faster than the counters' resolution allows; the
    readings are kept for HISTORY_S, which lets a quiet gate or a watch started right after a
    cooldown or a run look back into it. Thread-safe.

    Seams for tests: `counters() -> (busy_s, own_s)` and `clock() -> seconds`.
    """

    HISTORY_S = 10.0
    TREE_REFRESH_S = 0.25

    def __init__(self, exclude_pids: Iterable[int] | None = None, min_window_s: float | None = None, *,
                 counters: Callable[[], tuple[float, float]] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.own_pid = os.getpid()
        self.exclude_pids = set(exclude_pids or ())
        # Each caller may ask for its own minimum window in sample(); this is the default.
        self.min_window_s = min_window_for(15.0) if min_window_s is None else min_window_s
        self.denied = 0
        self._clock = clock
        self._counters = counters or self._read_counters
        self._history: deque[tuple[float, float, float]] = deque()
        self._lock = threading.Lock()
        self._procs: dict[int, psutil.Process] = {}
        self._ancestors: list[int] | None = None
        self._tree: set[int] | None = None
        self._tree_at = 0.0
        self._tree_fresh = True
        self._children_files = sys.platform.startswith("linux") and _children_files_work(self.own_pid)

    # -- counters

    def _ancestor_pids(self) -> list[int]:
        if self._ancestors is None:
            try:
                self._ancestors = [p.pid for p in psutil.Process(self.own_pid).parents()]
            except psutil.Error:
                self._ancestors = []
        return self._ancestors

    def _descendant_pids(self, fresh: bool = False) -> set[int]:
        if not self._children_files:
            # psutil builds a map of every process's parent: too dear for every 5 ms sample, so
            # it is reused for TREE_REFRESH_S, and sample() rescans before reporting a busy
            # reading that a child started meanwhile could explain.
            now = time.monotonic()
            if fresh or self._tree is None or now - self._tree_at >= self.TREE_REFRESH_S:
                try:
                    self._tree = {p.pid for p in psutil.Process(self.own_pid).children(recursive=True)}
                except psutil.Error:
                    self._tree = set()
                self._tree_at, self._tree_fresh = now, True
            else:
                self._tree_fresh = False
            return set(self._tree)
        self._tree_fresh = True
        out: set[int] = set()
        stack = [self.own_pid]
        while stack:
            for child in _linux_children(stack.pop()):
                if child not in out and child != self.own_pid:
                    out.add(child)
                    stack.append(child)
        return out

    def _cpu_s(self, pid: int, with_children: bool) -> float:
        proc = self._procs.get(pid)
        try:
            if proc is None:
                proc = self._procs[pid] = psutil.Process(pid)
            t = proc.cpu_times()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            self._procs.pop(pid, None)
            return 0.0
        except psutil.AccessDenied:
            self._procs.pop(pid, None)
            self._denied_now += 1
            return 0.0
        s = t.user + t.system
        if with_children:
            s += getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
        return s

    def _own_s(self, fresh: bool = False) -> float:
        self._denied_now = 0
        total = time.process_time()
        if resource is not None:
            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            total += ru.ru_utime + ru.ru_stime
        tree = self._descendant_pids(fresh)
        for pid in tree:
            total += self._cpu_s(pid, with_children=True)
        ancestors = [p for p in self._ancestor_pids() if p not in tree]
        for pid in ancestors:
            total += self._cpu_s(pid, with_children=False)
        for pid in self.exclude_pids - tree - set(ancestors) - {self.own_pid}:
            total += self._cpu_s(pid, with_children=True)
        keep = tree | set(ancestors) | self.exclude_pids
        for pid in [p for p in self._procs if p not in keep]:
            del self._procs[pid]
        self.denied = self._denied_now
        return total

    def _read_counters(self, fresh: bool = False) -> tuple[float, float]:
        return _busy_s(psutil.cpu_times()), self._own_s(fresh)

    # -- readings

    def prime(self) -> None:
        """Take a reading to measure later samples against (no sample is returned)."""
        with self._lock:
            self._push(self._clock(), *self._counters())

    def _push(self, now: float, busy: float, own: float) -> None:
        if self._history:
            own = max(own, self._history[-1][2])   # a race with a reaping parent never runs backwards
        self._history.append((now, busy, own))
        while len(self._history) > 2 and now - self._history[1][0] > self.HISTORY_S:
            self._history.popleft()

    def sample(self, min_window_s: float | None = None,
               recheck_pct: float | None = None) -> ForeignSample:
        """Foreign CPU over the window ending now. recheck_pct: a reading at or over it that was
        taken with a cached process tree is taken again with a fresh one (a child the engine
        started meanwhile is ours, not foreign)."""
        mw = self.min_window_s if min_window_s is None else min_window_s
        with self._lock:
            now = self._clock()
            busy, own = self._counters()
            base = next((p for p in reversed(self._history) if now - p[0] >= mw - 1e-9),
                        self._history[0] if self._history else None)
            got = self._reading(base, now, busy, own)
            if recheck_pct is not None and got.foreign_pct >= recheck_pct and not self._tree_fresh \
                    and self._counters == self._read_counters:
                now = self._clock()
                busy, own = self._read_counters(fresh=True)
                got = self._reading(base, now, busy, own)
            self._push(now, busy, own)
        return got

    def _reading(self, base: tuple[float, float, float] | None, now: float, busy: float,
                 own: float) -> ForeignSample:
        if self._history:
            own = max(own, self._history[-1][2])
        if base is None or now - base[0] <= 0:
            return ForeignSample(0.0, 0.0)
        win = now - base[0]
        busy_pct = 100.0 * (busy - base[1]) / win
        own_pct = 100.0 * (own - base[2]) / win
        return ForeignSample(max(0.0, busy_pct - own_pct), win, max(0.0, busy_pct), max(0.0, own_pct))


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


class _Namer:
    """Names the foreign processes behind a busy reading with one per-process scan.

    The first busy sample primes a ProcessSampler (its first reading of a pid is only a
    baseline); the first sample at least min_window_s later, or finish(), reads it. Once per
    gate or watch, so a busy host costs two ~10 ms scans, and a quiet one none.
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
        self.top: list[dict] = []

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

    def result(self) -> dict:
        return {**self.tally.summary(), "named": self.window_s is not None,
                "naming_window_s": self.window_s, "top_processes": self.top,
                "unreadable_processes": self.denied}


# ---------------------------------------------------------------- quiet gate

class QuietGate:
    """Wait out a cooldown while watching foreign CPU; then wait on only if the host was busy.

    wait(cooldown_s) samples every interval_s during the cooldown, the last sample exactly at
    its end. If no sample was busy, it returns right then: the cooldown was the settle window,
    and there is no extra wait. After a busy sample it waits on until the host has been quiet
    for settle_s since the last busy sample, or until timeout_s past the cooldown's end
    (timed_out). A sample whose window is shorter than the sampler's minimum (a fresh sampler
    with no earlier readings) decides nothing; the gate then samples again once it is long
    enough.

    Seams for tests: sampler (ForeignSample readings), process_sampler (the naming scan's
    Reading lists), clock and sleep.
    """

    def __init__(self, threshold_pct: float = 15.0, settle_s: float = 3.0,
                 timeout_s: float = 120.0, interval_s: float = 0.25,
                 exclude_pids: Iterable[int] | None = None, *,
                 sampler: Any = None, process_sampler: Any = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, cpus: int | None = None) -> None:
        self.threshold_pct = threshold_pct
        self.busy_at_pct = busy_threshold(threshold_pct, cpus)
        self.settle_s = settle_s
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self.min_window_s = min_window_for(threshold_pct)
        self.sampler = sampler or ForeignCpuSampler(exclude_pids, self.min_window_s)
        self._make_process_sampler = (lambda: process_sampler) if process_sampler is not None \
            else (lambda: ProcessSampler(exclude_pids))
        self._clock = clock
        self._sleep = sleep

    def _sleep_until(self, t: float, on_tick: Callable[[str, float], None] | None,
                     phase: str, ref: float) -> None:
        while (left := t - self._clock()) > 0:
            if on_tick is not None:
                on_tick(phase, max(0.0, ref - self._clock()) if phase == "cooldown"
                        else self._clock() - ref)
            self._sleep(min(0.25, left))

    def wait(self, cooldown_s: float = 0.0,
             on_tick: Callable[[str, float], None] | None = None) -> dict:
        """on_tick(phase, seconds): ("cooldown", seconds left) or ("quiet", seconds past it)."""
        cooldown_s = max(0.0, float(cooldown_s))
        start = self._clock()
        cool_end = start + cooldown_s
        deadline = cool_end + self.timeout_s
        namer = _Namer(self.threshold_pct, self.min_window_s, self._make_process_sampler)
        st = {"samples": 0, "busy": 0, "short": 0, "fmax": 0.0, "last": None, "wmin": None}
        last_busy: float | None = None
        at_end = True      # the next decision is the one scheduled at the cooldown's end
        self.sampler.prime()
        next_t = min(start + self.interval_s, cool_end)
        while True:
            cooling = next_t < cool_end or self._clock() < cool_end
            self._sleep_until(next_t, on_tick, "cooldown" if cooling else "quiet", cool_end)
            s = self.sampler.sample(self.min_window_s, self.threshold_pct)
            now = self._clock()
            conclusive = s.window_s > 0 and s.window_s >= self.min_window_s - 1e-9
            is_busy = conclusive and s.foreign_pct >= self.busy_at_pct
            if conclusive:
                st["samples"] += 1
                st["last"] = s.foreign_pct
                st["fmax"] = max(st["fmax"], s.foreign_pct)
                st["wmin"] = s.window_s if st["wmin"] is None else min(st["wmin"], s.window_s)
                if is_busy:
                    st["busy"] += 1
                    last_busy = now
                namer.on_sample(is_busy, now)
            else:
                st["short"] += 1
            if now >= cool_end - 1e-9:
                settled = last_busy is None or now - last_busy >= self.settle_s - 1e-9
                if conclusive and not is_busy and settled:
                    # Ready at the cooldown's end: no gate wait (the last sleep's overshoot, if
                    # any, is part of the cooldown). Otherwise the wait past it is the gate's.
                    extra = 0.0 if at_end else max(0.0, now - cool_end)
                    return self._result(namer, now, start, cooldown_s, extra, False, st)
                if now >= deadline - 1e-9:
                    return self._result(namer, now, start, cooldown_s, max(0.0, now - cool_end), True, st)
                at_end = False
                target = [now + self.interval_s, deadline]
                if not conclusive:
                    target.append(now + max(1e-3, self.min_window_s - s.window_s))
                elif last_busy is not None and not is_busy:
                    target.append(last_busy + self.settle_s)
                next_t = min(target)
            else:
                next_t = min(now + self.interval_s, cool_end)

    def _result(self, namer: _Namer, now: float, start: float, cooldown_s: float, extra: float,
                timed_out: bool, st: dict) -> dict:
        namer.finish(now)
        return {"waited_s": round(extra, 3), "cooldown_s": round(cooldown_s, 3),
                "total_s": round(now - start, 3), "timed_out": timed_out,
                "samples": st["samples"], "busy_samples": st["busy"], "short_samples": st["short"],
                "foreign_pct_max": round(st["fmax"], 1),
                "foreign_pct_last": None if st["last"] is None else round(st["last"], 1),
                "window_s_min": None if st["wmin"] is None else round(st["wmin"], 4),
                **namer.result(), "threshold_pct": self.threshold_pct, "busy_at_pct": self.busy_at_pct,
                "settle_s": self.settle_s,
                "timeout_s": self.timeout_s, "interval_s": self.interval_s,
                "min_window_s": round(self.min_window_s, 4), "sampler": "foreign_cpu"}


# ---------------------------------------------------------------- contention watch

class ContentionWatch:
    """Sample foreign CPU in a background thread while the `with` body runs.

    A sample is contended when the foreign total is at or over threshold_pct (over_threshold).
    Each sample covers at least min_window_for(threshold_pct), reaching back into the
    sampler's earlier readings (a shared sampler holds the quiet gate's and the previous
    run's), so samples may be far denser than the counters' resolution: the runner asks for
    about a dozen per run. A fresh sampler's first samples cover less (short_samples).
    """

    def __init__(self, threshold_pct: float = 15.0, interval_s: float = 0.25,
                 exclude_pids: Iterable[int] | None = None, *,
                 sampler: Any = None, process_sampler: Any = None,
                 clock: Callable[[], float] = time.monotonic, cpus: int | None = None) -> None:
        self.threshold_pct = threshold_pct
        self.busy_at_pct = busy_threshold(threshold_pct, cpus)
        self.interval_s = interval_s
        self.min_window_s = min_window_for(threshold_pct)
        self.sampler = sampler or ForeignCpuSampler(exclude_pids, self.min_window_s)
        make = (lambda: process_sampler) if process_sampler is not None \
            else (lambda: ProcessSampler(exclude_pids))
        self._namer = _Namer(threshold_pct, self.min_window_s, make)
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = 0
        self.contended_samples = 0
        self.short_samples = 0
        self._fsum = self._fmax = 0.0
        self._wmin: float | None = None
        self._started = self._finished = 0.0
        self._watch_cpu_s = 0.0

    def __enter__(self) -> "ContentionWatch":
        self.sampler.prime()  # synchronously, so the first interval is already measured
        self._started = self._last = self._clock()
        self._thread = threading.Thread(target=self._loop, name="contention-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._finished = self._clock()

    def _take(self) -> None:
        s = self.sampler.sample(self.min_window_s, self.threshold_pct)
        now = self._last = self._clock()
        self.samples += 1
        busy = over_threshold(s, self.busy_at_pct, self.min_window_s)
        if s.window_s < self.min_window_s - 1e-9:
            self.short_samples += 1
        if busy:
            self.contended_samples += 1
        self._fsum += s.foreign_pct
        self._fmax = max(self._fmax, s.foreign_pct)
        self._wmin = s.window_s if self._wmin is None else min(self._wmin, s.window_s)
        self._namer.on_sample(busy, now)

    def _loop(self) -> None:
        cpu0 = time.thread_time()
        while not self._stop.wait(self.interval_s):
            self._take()
        # Cover the tail of the run (the sampler's window reaches back as far as it must).
        if self.samples == 0 or self._clock() - self._last >= self.interval_s / 2:
            self._take()
        self._namer.finish(self._clock())
        # The watcher competes with the run for CPU; report what it spent.
        self._watch_cpu_s = time.thread_time() - cpu0

    def result(self) -> dict:
        frac = self.contended_samples / self.samples if self.samples else None
        return {"samples": self.samples, "contended_samples": self.contended_samples,
                "contended_fraction": round(frac, 4) if frac is not None else None,
                "foreign_pct_max": round(self._fmax, 1),
                "foreign_pct_mean": round(self._fsum / self.samples, 1) if self.samples else None,
                "window_s_min": None if self._wmin is None else round(self._wmin, 4),
                "short_samples": self.short_samples,
                **self._namer.result(), "threshold_pct": self.threshold_pct, "busy_at_pct": self.busy_at_pct,
                "interval_s": self.interval_s, "min_window_s": round(self.min_window_s, 4),
                "duration_s": round((self._finished or self._clock()) - self._started, 3),
                "watch_cpu_s": round(self._watch_cpu_s, 4), "sampler": "foreign_cpu"}


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
_NV_STATE_KEYS = ["sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_draw_w",
                  "throttle_reasons_active"]


def decode_throttle(mask: str) -> list[str] | str:
    try:
        bits = int(mask, 16)
    except ValueError:
        return UNKNOWN
    return [name for bit, name in _THROTTLE_BITS.items() if bits & bit]


_NV_REASON_FIELDS = ["clocks_throttle_reasons.active", "clocks_event_reasons.active"]


def nvidia_state() -> list[dict] | str:
    fields = "clocks.sm,clocks.mem,temperature.gpu,power.draw,{}"
    out = None
    # Newer drivers call throttle reasons "clocks_event_reasons"; the name that answered is
    # tried first next time (each try is an nvidia-smi process, as long as a short run).
    for reasons in list(_NV_REASON_FIELDS):
        out = run_quiet(["nvidia-smi", "--query-gpu=" + fields.format(reasons),
                         "--format=csv,noheader,nounits"])
        if out is not None:
            _NV_REASON_FIELDS.remove(reasons)
            _NV_REASON_FIELDS.insert(0, reasons)
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


def parse_thermal_zones(files: dict[str, str]) -> list[dict]:
    """Linux /sys/class/thermal text -> one dict per zone with a readable temperature.

    files maps paths relative to /sys/class/thermal ("thermal_zone0/temp",
    "thermal_zone0/trip_point_1_type", ...) to their text. Temperatures are millidegrees C.
    passive_c is the zone's lowest "passive" trip point (where the kernel starts throttling),
    None when it has none.
    """
    zones: dict[str, dict] = {}
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


def thermal_verdict(state: dict) -> dict:
    """thermal_state()'s dict -> {"checked", "nominal", "reason"}; pure.

    Not nominal: macOS CPU_Speed_Limit < 100; an NVIDIA GPU with a hot clock-event reason
    (NVIDIA_HOT_REASONS); a Linux thermal zone at or above its lowest passive trip point.
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
    if not checked:
        return {"checked": False, "nominal": UNKNOWN, "reason": "no thermal state readable"}
    if hot:
        return {"checked": True, "nominal": False, "reason": "; ".join(hot)}
    return {"checked": True, "nominal": True, "reason": "nominal (" + ", ".join(seen) + ")"}


_RECENT: dict[str, Any] = {}


def recent_thermal_state(max_age_s: float = 2.0, clock: Callable[[], float] = time.monotonic) -> dict:
    """thermal_state(), reusing a nominal reading younger than max_age_s: a reading costs an
    nvidia-smi or pmset process, about as long as a short run. A reading that is not nominal is
    never reused; a reused one says how old it is ("reused_age_s")."""
    now = clock()
    got = _RECENT.get("state")
    if got is not None and now - _RECENT["at"] < max_age_s and thermal_verdict(got)["nominal"] is not False:
        return {**got, "reused_age_s": round(now - _RECENT["at"], 3)}
    state = thermal_state()
    _RECENT.update(state=state, at=now)
    return state


def wait_thermal(limit_s: float, *, read: Callable[[], dict] | None = None, wait: bool = True,
                 poll_s: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 on_tick: Callable[[float, str], None] | None = None) -> tuple[dict, dict]:
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
