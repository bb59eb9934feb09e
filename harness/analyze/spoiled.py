"""A run's reasons to be set aside for the host it ran on, from the readings the runner recorded.

Besides another process's CPU (the runner's "contended" mark), a lab Mac can spoil a run in
ways the contention watch does not see: a Time Machine backup, battery power (macOS lowers the
clocks), thermal pressure above nominal (the run went ahead after the bounded thermal wait),
or another process's GPU work. A run with any of these reasons is left out of every verdict's
samples (`usable`), and still counts as contended (analyze.contended.is_contended): past the
suite's contended share a clean verdict becomes inconclusive, exactly as for contention.

Reason codes (short, for flags; the legend's words are the renderers'):
  backup    a backup was running when the run started (`tmutil status`)
  battery   the host drew from its battery when the run started (`pmset -g batt`)
  thermal   thermal pressure above nominal when the run started (macos.thermal_pressure)
  gpu-busy  the GPU busy while our engine was idle, just before or just after the run

Pure functions of recorded runs; Linux and NVIDIA records carry none of these readings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from harness.core.hostinfo import GpuLoad, ThermalState
from harness.core.runs import as_run, measured_ok
from harness.core.schema import Run

R = TypeVar("R", bound=Run | Mapping[str, Any])
BACKUP, BATTERY, THERMAL, GPU_BUSY = "backup", "battery", "thermal", "gpu-busy"
REASONS = (BACKUP, BATTERY, THERMAL, GPU_BUSY)   # in the order they are said
BATTERY_SOURCE = "Battery Power"                 # pmset -g batt: "Now drawing from 'Battery Power'"
PRESSURE_ABOVE_NOMINAL = ("fair", "serious", "critical")


def _gpu_busy(gpu: GpuLoad | None) -> bool:
    """load.gpu: the idle readings either side of the run, and the limit they were held to."""
    if gpu is None:
        return False
    return any(g is not None and g.device_pct is not None and g.device_pct >= gpu.limit_pct
               for g in (gpu.before, gpu.after))


def reasons(run: Run | Mapping[str, Any]) -> tuple[str, ...]:
    """The run's reasons to be set aside (REASONS' codes, in that order); () for none."""
    load = as_run(run).load
    th = load.thermal or ThermalState()
    found = {BACKUP: th.backup_running is True,
             BATTERY: th.power_source == BATTERY_SOURCE,
             THERMAL: th.thermal_pressure in PRESSURE_ABOVE_NOMINAL,
             GPU_BUSY: _gpu_busy(load.gpu)}
    return tuple(r for r in REASONS if found[r])


def _measured(run: Run | Mapping[str, Any]) -> bool:
    return not as_run(run).warmup


def counts(runs: Iterable[Run | Mapping[str, Any]]) -> dict[str, int]:
    """How many measured runs have each reason (only the reasons found, in REASONS' order)."""
    n = dict.fromkeys(REASONS, 0)
    for r in runs:
        if _measured(r):
            for why in reasons(r):
                n[why] += 1
    return {k: v for k, v in n.items() if v}


def set_aside_runs(runs: Iterable[Run | Mapping[str, Any]]) -> int:
    """Measured runs with at least one reason."""
    return sum(1 for r in runs if _measured(r) and reasons(r))


def usable(run: Run | Mapping[str, Any]) -> bool:
    """A run a verdict may take: measured, finished ok, and not set aside for its host."""
    return measured_ok(run) and not reasons(run)


def usable_runs(runs: Iterable[R]) -> list[R]:
    """The runs of `runs` a verdict may take (`usable`), in their order."""
    return [r for r in runs if usable(r)]
