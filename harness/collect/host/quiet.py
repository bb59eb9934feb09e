"""The quiet wait before a run and the contention watch during it, on the foreign-CPU readings
of harness.collect.host.load (see its docstring for what "foreign" and "busy" mean)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

import msgspec

from harness.collect.host import gpuload
from harness.collect.host.load import ForeignCpuSampler, busy_threshold, min_window_for, over_threshold
from harness.collect.host.processes import Namer, ProcessSampler

# ---------------------------------------------------------------- quiet wait

# The quiet wait's limits sized to the work, where a suite leaves [quiet] settle_s / timeout_s unset:
# waiting for a quiet host is worth a few runs' length, not 120 s before a 20 ms run (a first
# session on a busy host once waited 427 s for 2 s of measuring). A run of 6 s or longer keeps
# the fixed defaults (settle 3 s, timeout 120 s), as every run had before.
TIMEOUT_RUNS = 20.0        # wait at most this many expected runs' length for a quiet host
TIMEOUT_FLOOR_S = 1.0      # a few of the quiet wait's 0.25 s samples, so a brief burst can pass
TIMEOUT_CAP_S = 120.0      # the old fixed default
SETTLE_RUNS = 2.0          # quiet for two runs' length after a busy sample
SETTLE_FLOOR_S = 0.5       # past one sample's window (0.27 s at the default 15 %)
SETTLE_CAP_S = 3.0         # the old fixed default


@dataclass(frozen=True)
class WaitLimits:
    """The settle and timeout of one run's quiet wait, and where they came from."""

    settle_s: float
    timeout_s: float
    expected_wall_s: float | None   # the run's predicted length the sizing used (None: unknown)
    sized: tuple[str, ...]          # which limits were sized to it ("settle_s", "timeout_s")

    def to_dict(self) -> dict[str, Any]:
        return {"expected_wall_s": None if self.expected_wall_s is None else round(self.expected_wall_s, 4),
                "sized": list(self.sized)}


def wait_limits(settle_s: float | None, timeout_s: float | None,
                expected_wall_s: float | None) -> WaitLimits:
    """The suite's settle_s and timeout_s where it sets them; else clamp(k x the expected run,
    floor, cap) each (the constants above). No expected run (a session's first): the floors."""
    e = expected_wall_s if expected_wall_s is not None and expected_wall_s > 0 else None

    def sized(k: float, floor: float, cap: float) -> float:
        return floor if e is None else min(cap, max(floor, k * e))
    return WaitLimits(
        settle_s=float(settle_s) if settle_s is not None else sized(SETTLE_RUNS, SETTLE_FLOOR_S, SETTLE_CAP_S),
        timeout_s=float(timeout_s) if timeout_s is not None else sized(TIMEOUT_RUNS, TIMEOUT_FLOOR_S, TIMEOUT_CAP_S),
        expected_wall_s=e,
        sized=tuple(k for k, v in (("settle_s", settle_s), ("timeout_s", timeout_s)) if v is None))


@dataclass
class _QuietTally:
    """The quiet wait's samples so far: conclusive, busy and short ones, the foreign CPU's
    highest and last reading, the shortest window, and the GPU's samples."""
    gpu: gpuload.QuietGpu
    samples: int = 0
    busy: int = 0
    short: int = 0
    fmax: float = 0.0
    last: float | None = None
    wmin: float | None = None


class QuietWait:
    """Wait out a cooldown while watching foreign CPU; then wait on only if the host was busy.

    wait(cooldown_s) samples every interval_s during the cooldown, the last sample exactly at
    its end. If no sample was busy, it returns right then: the cooldown was the settle window,
    and there is no extra wait. After a busy sample it waits on until the host has been quiet
    for settle_s since the last busy sample, or until timeout_s past the cooldown's end
    (timed_out). A sample whose window is shorter than the sampler's minimum (a fresh sampler
    with no earlier readings) decides nothing; the quiet wait then samples again once it is long
    enough.

    Where the host reports GPU utilization (gpu: a reader, host/gpuload.py), each sample reads
    the GPU too: our engine is idle now, so a reading at or over gpu_limit_pct is another
    process's work and the sample is busy. The result's "gpu" holds those readings.

    Seams for tests: sampler (ForeignSample readings), process_sampler (the naming scan's
    Reading lists), gpu, clock and sleep.
    """

    def __init__(self, threshold_pct: float = 15.0, settle_s: float = 3.0,
                 timeout_s: float = 120.0, interval_s: float = 0.25,
                 exclude_pids: Iterable[int] | None = None, *,
                 sampler: Any = None, process_sampler: Any = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, cpus: int | None = None,
                 gpu: gpuload.Reader | None = None, gpu_limit_pct: float = gpuload.GPU_BUSY_PCT) -> None:
        self.threshold_pct = threshold_pct
        self.busy_at_pct = busy_threshold(threshold_pct, cpus)
        self._gpu = (gpu, gpu_limit_pct)
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
             on_tick: Callable[[str, float], None] | None = None) -> dict[str, Any]:
        """on_tick(phase, seconds): ("cooldown", seconds left) or ("quiet", seconds past it)."""
        cooldown_s = max(0.0, float(cooldown_s))
        start = self._clock()
        cool_end = start + cooldown_s
        deadline = cool_end + self.timeout_s
        namer = Namer(self.threshold_pct, self.min_window_s, self._make_process_sampler)
        gpu = gpuload.QuietGpu(*self._gpu)
        st = _QuietTally(gpu=gpu)
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
            cpu_busy = conclusive and s.foreign_pct >= self.busy_at_pct
            gpu_busy = gpu.sample()
            is_busy = cpu_busy or gpu_busy
            if conclusive:
                st.samples += 1
                st.last = s.foreign_pct
                st.fmax = max(st.fmax, s.foreign_pct)
                st.wmin = s.window_s if st.wmin is None else min(st.wmin, s.window_s)
                if is_busy:
                    st.busy += 1
                    last_busy = now
                namer.on_sample(cpu_busy, now)   # names CPU offenders only
            else:
                st.short += 1
                if gpu_busy:      # a busy GPU decides, whatever the CPU window
                    st.busy += 1
                    last_busy = now
            if now >= cool_end - 1e-9:
                settled = last_busy is None or now - last_busy >= self.settle_s - 1e-9
                if conclusive and not is_busy and settled:
                    # Ready at the cooldown's end: no quiet wait (the last sleep's overshoot, if
                    # any, is part of the cooldown). Otherwise the wait past it is the quiet wait.
                    extra = 0.0 if at_end else max(0.0, now - cool_end)
                    return self._result(namer, now, start, cooldown_s, extra, False, st)
                if now >= deadline - 1e-9:
                    return self._result(namer, now, start, cooldown_s, max(0.0, now - cool_end), True, st)
                at_end = False
                target = [now + self.interval_s, deadline]
                if not conclusive and not gpu_busy:
                    target.append(now + max(1e-3, self.min_window_s - s.window_s))
                elif last_busy is not None and not is_busy:
                    target.append(last_busy + self.settle_s)
                next_t = min(target)
            else:
                next_t = min(now + self.interval_s, cool_end)

    def _result(self, namer: Namer, now: float, start: float, cooldown_s: float, extra: float,
                timed_out: bool, st: _QuietTally) -> dict[str, Any]:
        namer.finish(now)
        g = st.gpu.result()
        return {"waited_s": round(extra, 3), "cooldown_s": round(cooldown_s, 3),
                "total_s": round(now - start, 3), "timed_out": timed_out,
                "samples": st.samples, "busy_samples": st.busy, "short_samples": st.short,
                "foreign_pct_max": round(st.fmax, 1),
                "foreign_pct_last": None if st.last is None else round(st.last, 1),
                "window_s_min": None if st.wmin is None else round(st.wmin, 4),
                **namer.result(), "threshold_pct": self.threshold_pct, "busy_at_pct": self.busy_at_pct,
                "settle_s": self.settle_s,
                "timeout_s": self.timeout_s, "interval_s": self.interval_s,
                "min_window_s": round(self.min_window_s, 4), "sampler": "foreign_cpu",
                **({"gpu": msgspec.to_builtins(g)} if g is not None else {})}


# ---------------------------------------------------------------- contention watch

WATCH_TARGET_SAMPLES = 20   # a run as long as predicted gets about this many, evenly spaced
WATCH_FLOOR_S = 0.005       # never closer than this
WATCH_EARLY = 4.0           # the interval grows at most this fast with the time already watched


def watch_interval(predicted_s: float | None, elapsed_s: float, cap_s: float) -> float:
    """The wait before the next sample: clamp(h / 20, 5 ms, cap_s), where
    h = min(max(predicted_s, elapsed_s), 4 x elapsed_s).

    A run as long as predicted gets about 20 samples (a few more early on). One far shorter than
    predicted (the first run after a warm-up that loaded the model) is still sampled densely from
    its start: 10 samples by 50 ms, about 16 by 150 ms. One far longer grows its interval with
    the time watched, so its sample count grows with the log of its length, not linearly.
    predicted_s None: every wait is cap_s."""
    if predicted_s is None:
        return cap_s
    e = max(0.0, elapsed_s)
    h = min(max(predicted_s, e), WATCH_EARLY * e)
    return min(cap_s, max(WATCH_FLOOR_S, h / WATCH_TARGET_SAMPLES))


class ContentionWatch:
    """Sample foreign CPU in a background thread while the `with` body runs, paced by
    watch_interval. The runner runs it in a process of its own (host/watcher.py), where no
    engine holds the GIL; root_pid then names the harness process whose tree is ours.

    A sample is contended when the foreign total is at or over threshold_pct (over_threshold).
    Each sample covers at least min_window_for(threshold_pct), reaching back into the
    sampler's earlier readings (a shared sampler holds the previous ones), so samples may be
    far denser than the counters' resolution. A fresh sampler's first samples cover less
    (short_samples).
    """

    def __init__(self, threshold_pct: float = 15.0, interval_s: float = 0.25,
                 exclude_pids: Iterable[int] | None = None, *,
                 predicted_s: float | None = None, root_pid: int | None = None,
                 sampler: Any = None, process_sampler: Any = None,
                 clock: Callable[[], float] = time.monotonic, cpus: int | None = None) -> None:
        self.threshold_pct = threshold_pct
        self.busy_at_pct = busy_threshold(threshold_pct, cpus)
        self.interval_s = interval_s          # the most between two samples
        self.predicted_s = predicted_s        # the run's predicted length: see watch_interval
        self.min_window_s = min_window_for(threshold_pct)
        self.sampler = sampler or ForeignCpuSampler(exclude_pids, self.min_window_s, root_pid=root_pid)
        make = (lambda: process_sampler) if process_sampler is not None \
            else (lambda: ProcessSampler(exclude_pids, root_pid=root_pid))
        self._namer = Namer(threshold_pct, self.min_window_s, make)
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

    def __enter__(self) -> ContentionWatch:
        self.sampler.prime()  # synchronously, so the first interval is already measured
        self._started = self._last = self._clock()
        self._thread = threading.Thread(target=self._loop, name="contention-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
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

    def _wait_s(self) -> float:
        """Until the next sample is due, counted from the last one (a sample's own cost does
        not stretch the schedule)."""
        now = self._clock()
        return max(0.0, self._last + watch_interval(self.predicted_s, now - self._started, self.interval_s) - now)

    def _loop(self) -> None:
        cpu0 = time.thread_time()
        while not self._stop.wait(self._wait_s()):
            self._take()
        # Cover the tail of the run (the sampler's window reaches back as far as it must).
        now = self._clock()
        if self.samples == 0 or now - self._last >= watch_interval(self.predicted_s, now - self._started,
                                                                    self.interval_s) / 2:
            self._take()
        self._namer.finish(self._clock())
        # The watcher competes with the run for CPU; report what it spent.
        self._watch_cpu_s = time.thread_time() - cpu0

    def result(self) -> dict[str, Any]:
        frac = self.contended_samples / self.samples if self.samples else None
        return {"samples": self.samples, "contended_samples": self.contended_samples,
                "contended_fraction": round(frac, 4) if frac is not None else None,
                "foreign_pct_max": round(self._fmax, 1),
                "foreign_pct_mean": round(self._fsum / self.samples, 1) if self.samples else None,
                "window_s_min": None if self._wmin is None else round(self._wmin, 4),
                "short_samples": self.short_samples,
                **self._namer.result(), "threshold_pct": self.threshold_pct, "busy_at_pct": self.busy_at_pct,
                "interval_s": self.interval_s, "predicted_wall_s": self.predicted_s,
                "min_window_s": round(self.min_window_s, 4),
                "duration_s": round((self._finished or self._clock()) - self._started, 3),
                "watch_cpu_s": round(self._watch_cpu_s, 4), "sampler": "foreign_cpu"}


