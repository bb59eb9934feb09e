"""Another process's GPU work, where the platform reports GPU utilization (Apple silicon:
IOAccelerator's "Device Utilization %", host/applegpu.py); None elsewhere, and then nothing here
adds a key to a run.

The quiet wait reads the GPU with every sample: while our engine is idle any utilization is
another process's, and a sample at or over GPU_BUSY_PCT is busy (the quiet wait goes on). During a run
the device utilization is ours and theirs together and nothing separates them on Apple silicon
(one GPU, no per-process counters without root), so the contention rule reads the GPU while
our engine is idle on either side of the run: the quiet wait's last reading just before it, and one
taken AFTER_SETTLE_S after it ends. Either at or over the limit: analyze.spoiled's "gpu-busy".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import msgspec

from harness.core.hostinfo import GpuLoad, GpuReading, QuietGpuResult, QuietWaitResult

# An idle Mac's GPU reads a few percent (the window server compositing a display); another
# compute job reads 90-100. 20 sits between them.
GPU_BUSY_PCT = 20.0
# The driver's utilization covers a short recent window: past it, our own run's tail is gone.
AFTER_SETTLE_S = 0.25

Reader = Callable[[], Any]   # () -> applegpu.AppleGpu | None


def read() -> Any:
    """This host's GPU reading now (applegpu.AppleGpu), None where there is none; a reader
    that breaks reads as none (a sensor must not stop a run)."""
    from harness.collect.host.applegpu import gpu_utilization
    try:
        return gpu_utilization()
    except Exception:
        return None


def reading(g: Any) -> GpuReading:
    """A GPU reading (applegpu.AppleGpu, or one as recorded) as the record keeps it."""
    if isinstance(g, GpuReading):
        return g
    return msgspec.convert(g.to_dict() if hasattr(g, "to_dict") else g, GpuReading)


def busy(g: Any, limit_pct: float = GPU_BUSY_PCT) -> bool:
    """A reading (AppleGpu or GpuReading) at or over limit_pct of device utilization."""
    pct = g.device_pct
    return isinstance(pct, (int, float)) and not isinstance(pct, bool) and pct >= limit_pct


class QuietGpu:
    """The quiet wait's GPU samples: one reading per quiet-wait sample, until the reader gives None
    (no GPU reading on this host: it is not asked again)."""

    def __init__(self, reader: Reader | None, limit_pct: float = GPU_BUSY_PCT) -> None:
        self.reader, self.limit_pct = reader, limit_pct
        self.samples = self.busy_samples = 0
        self.pct_max: float | None = None
        self.last: Any = None

    def sample(self) -> bool:
        """Read once; whether this reading is busy."""
        if self.reader is None:
            return False
        g = self.reader()
        if g is None:
            self.reader = None
            return False
        self.samples += 1
        self.last = g
        pct = g.device_pct
        if isinstance(pct, (int, float)):
            self.pct_max = pct if self.pct_max is None else max(self.pct_max, pct)
        hit = busy(g, self.limit_pct)
        self.busy_samples += hit
        return hit

    def result(self) -> QuietGpuResult | None:
        """The samples, the busy ones, the highest reading, the limit and the last reading; None unread."""
        if not self.samples:
            return None
        return QuietGpuResult(samples=self.samples, busy_samples=self.busy_samples, device_pct_max=self.pct_max,
                              limit_pct=self.limit_pct, last=reading(self.last))


def before_run(quiet: QuietWaitResult | dict[str, Any], reader: Reader | None = None) -> GpuReading | None:
    """The GPU reading just before a run: the quiet wait's last, or (the quiet wait off) one read now;
    None where the host gives none."""
    waited = quiet if isinstance(quiet, QuietWaitResult) else msgspec.convert(quiet, QuietWaitResult)
    if waited.gpu is not None and waited.gpu.last is not None:
        return waited.gpu.last
    g = (reader or read)()
    return None if g is None else reading(g)


def after_run(before: GpuReading | None, reader: Reader | None = None,
              limit_pct: float = GPU_BUSY_PCT, settle_s: float = AFTER_SETTLE_S,
              sleep: Callable[[float], None] = time.sleep) -> GpuLoad | None:
    """The run's GPU readings while our engine is idle: `before` (before_run's) and one read
    settle_s after the run: the record's load.gpu. None where there was no reading before."""
    if before is None:
        return None
    sleep(settle_s)
    after = (reader or read)()
    return GpuLoad(limit_pct=limit_pct, settle_s=settle_s, before=before,
                   after=None if after is None else reading(after))
