"""What bounds a measured decode step: memory bandwidth, or dispatch (launch and sync overhead).

The bandwidth-bound time is bytes per step / peak bandwidth. Under half the measured step, the
step is not bound by bandwidth. It is bound by dispatch (launch and sync overhead) when the
dispatch floor (the host's time to build and issue one step without waiting for it, when the
engine measured that; else one trivial evaluated op plus layers x one evaluated decoder layer)
is at least half the measured step; otherwise by neither, and the
share of the step that neither explains is reported (the larger of the two times counts as
explained: a layer's evaluated forward reads that layer's weights, so the two overlap).
Units: bytes, ms, GB/s (1e9 B/s), as in harness.analyze.costmodel, which re-exports these names
(this module imports nothing of it, so the cost model's module stays one import).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.core.recordsections import Scaling

BANDWIDTH_BOUND_SHARE = 0.5   # bandwidth-bound time / step at or above which the step is bandwidth-bound
DISPATCH_BOUND_SHARE = 0.5    # dispatch floor / step at or above which the step is dispatch-bound

BOUND_BANDWIDTH = "bandwidth"
BOUND_DISPATCH = "dispatch"
BOUND_NEITHER = "neither"
BOUND_NOT_BANDWIDTH = "not bandwidth"      # not bandwidth-bound; no dispatch floor was measured
BOUND_UNKNOWN = "unknown"                  # no peak bandwidth: the bandwidth-bound time is unknown


@dataclass(frozen=True)
class DispatchFloor:
    """The engine's measured dispatch floor (a record's scaling.dispatch), in ms."""

    empty_ms: float                 # one trivial evaluated op: a launch and a sync round trip
    layer_ms: float | None = None   # one evaluated T=1 forward of one decoder layer
    layers: int | None = None       # decoder layers of the target
    step_ms: float | None = None    # one evaluated T=1 forward of the whole target, same context
    repeats: int | None = None
    issue_ms: float | None = None   # the host building and issuing one T=1 step, not waiting for it

    @property
    def layers_ms(self) -> float | None:
        return self.layers * self.layer_ms if self.layers and self.layer_ms is not None else None

    @property
    def floor_ms(self) -> float:
        # The host's issue time per step when measured: a pipelined step cannot beat it. Else one
        # sync plus the layers evaluated one by one (each of those also syncs: an upper bound).
        if self.issue_ms is not None:
            return self.issue_ms
        return self.empty_ms + (self.layers_ms or 0.0)


def dispatch_floor(scaling: Scaling | None) -> DispatchFloor | None:
    """A record's scaling block's dispatch floor; None when the record has none (older records)
    or its empty_ms is not a finite non-negative number."""
    d = scaling.dispatch if scaling is not None else None
    if d is None:
        return None

    def num(v: float | None) -> float | None:
        return float(v) if v is not None and math.isfinite(v) and v >= 0 else None
    empty = num(d.empty_ms)
    if empty is None:
        return None
    layers = d.layers if d.layers is not None and d.layers > 0 else None
    return DispatchFloor(empty, num(d.layer_ms), layers, num(d.step_ms), d.repeats, num(d.issue_ms))


@dataclass(frozen=True)
class Roofline:
    """What bounds a measured step: `bound` is one of the BOUND_* names."""

    step_ms: float
    bytes_per_step: int
    peak_gb_s: float | None
    bandwidth_ms: float | None      # bytes / peak; None: unknown peak
    floor: DispatchFloor | None     # None: not measured
    bound: str
    unexplained: float | None       # share of the step neither explains (bound "neither" only)

    @property
    def bandwidth_share(self) -> float | None:
        return None if self.bandwidth_ms is None else self.bandwidth_ms / self.step_ms

    @property
    def floor_share(self) -> float | None:
        return None if self.floor is None else self.floor.floor_ms / self.step_ms


def roofline(bytes_per_step: int, step_ms: float, peak_gb_s: float | None,
             floor: DispatchFloor | None) -> Roofline:
    """Bandwidth-bound time against the measured step, then the dispatch floor (see above)."""
    if isinstance(step_ms, bool) or not isinstance(step_ms, (int, float)) or not math.isfinite(step_ms) or step_ms <= 0:
        raise ValueError(f"step_ms: must be a positive finite number, got {step_ms!r}")
    step = float(step_ms)
    if peak_gb_s is not None and not (isinstance(peak_gb_s, (int, float)) and math.isfinite(peak_gb_s) and peak_gb_s > 0):
        raise ValueError(f"peak_gb_s: must be a positive finite number or None, got {peak_gb_s!r}")
    bw = None if peak_gb_s is None else bytes_per_step / (peak_gb_s * 1e9) * 1000.0
    unexplained = None
    if bw is None:
        bound = BOUND_UNKNOWN
    elif bw >= BANDWIDTH_BOUND_SHARE * step:
        bound = BOUND_BANDWIDTH
    elif floor is None or floor.floor_ms > step:
        # A floor above the step itself bounds nothing (layers evaluated one by one each pay a
        # sync; a host issue time measured alone is not what the pipelined loop pays).
        bound = BOUND_NOT_BANDWIDTH
    elif floor.floor_ms >= DISPATCH_BOUND_SHARE * step:
        bound = BOUND_DISPATCH
    else:
        bound = BOUND_NEITHER
        unexplained = max(0.0, step - max(bw, floor.floor_ms)) / step
    return Roofline(step, int(bytes_per_step), None if peak_gb_s is None else float(peak_gb_s), bw, floor,
                    bound, unexplained)
