"""Load around a run: snapshots, a quiet wait before it, a contention watch during it, and
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

A quiet-wait or watch sample is busy (contended) when the foreign total is at or over
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
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

import psutil

from harness.collect.host.info import UNKNOWN

# ---------------------------------------------------------------- load snapshot

_last_cpu_times: Any = None
_last_cpu_clock: float = 0.0


def _total(t: Any) -> float:
    # Linux counts guest time inside user/nice as well; psutil subtracts it the same way.
    total: float = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    return total


def _busy_pct(before: Any, after: Any) -> float:
    total = _total(after) - _total(before)
    idle = sum(getattr(after, k, 0.0) - getattr(before, k, 0.0) for k in ("idle", "iowait"))
    return round(max(0.0, min(100.0, 100.0 * (total - idle) / total)), 1) if total > 0 else 0.0


def load_snapshot() -> dict[str, Any]:
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
    one: float | str
    five: float | str
    fifteen: float | str
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        one = five = fifteen = UNKNOWN
    return {"timestamp": time.time(), "loadavg_1": one, "loadavg_5": five, "loadavg_15": fifteen,
            "cpu_pct": pct, "cpu_pct_window_s": round(window, 3)}


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


def over_threshold(s: ForeignSample, threshold_pct: float, min_window_s: float,
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

    def as_dict(self) -> dict[str, Any]:
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
    readings are kept for HISTORY_S, which lets a quiet wait or a watch started right after a
    cooldown or a run look back into it. Thread-safe.

    Seams for tests: `counters() -> (busy_s, own_s)` and `clock() -> seconds`.
    """

    HISTORY_S = 10.0
    TREE_REFRESH_S = 0.25

    def __init__(self, exclude_pids: Iterable[int] | None = None, min_window_s: float | None = None, *,
                 counters: Callable[[], tuple[float, float]] | None = None,
                 clock: Callable[[], float] = time.monotonic, root_pid: int | None = None) -> None:
        # root_pid: whose tree is "ours"; another process's when this sampler runs in the
        # contention watch's own process (harness.collect.host.watcher), which is in that tree.
        self.own_pid = os.getpid() if root_pid is None else root_pid
        self._is_self = self.own_pid == os.getpid()
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
        s: float = t.user + t.system   # psutil is untyped: seconds
        if with_children:
            s += getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
        return s

    def _own_s(self, fresh: bool = False) -> float:
        self._denied_now = 0
        if self._is_self:
            total = time.process_time()
            if resource is not None:
                ru = resource.getrusage(resource.RUSAGE_CHILDREN)
                total += ru.ru_utime + ru.ru_stime
        else:
            total = self._cpu_s(self.own_pid, with_children=True)
        tree = self._descendant_pids(fresh)
        for pid in tree:
            total += self._cpu_s(pid, with_children=True)
        ancestors = [p for p in self._ancestor_pids() if p not in tree]
        for pid in ancestors:
            total += self._cpu_s(pid, with_children=False)
        for pid in self.exclude_pids - tree - set(ancestors) - {self.own_pid}:
            total += self._cpu_s(pid, with_children=True)
        keep = tree | set(ancestors) | self.exclude_pids | {self.own_pid}
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


