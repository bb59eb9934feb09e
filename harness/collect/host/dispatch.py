"""The dispatch measurement: a fixed piece of MLX work, timed right after each run in the process
that made it, whose time follows the host's state and not the code under test.

Why: on a GPU host the decode of one batch is bound by how fast the process dispatches
kernels, and that speed wanders with the host's state for seconds at a time. The two runs of
a pair see different moments of it, and that difference is most of a pair's spread. Work that
is the same on both sides of a check and timed in the same moment sees the same wander: its
pair ratio then predicts part of the engine's, and the paired verdict subtracts that part
(harness.analyze.covariate, docs/statistics.md, "The dispatch measurement"). Prefill cannot serve:
it changes with the code.

The work: STEPS small dependent matrix-vector products, each evaluated before the next is
dispatched, on MLX's default device: many small synchronised dispatches, like a decode step.
It took 4-10 ms on the 2-core CPU host (not measured on a GPU yet). Without MLX (an engine run as a
command, in an environment with no MLX) there is no probe, and the check is judged as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable

STEPS = 32
WIDTH = 512

_PROBE: list[Callable[[], float] | None] = []


def _make() -> Callable[[], float] | None:
    try:
        import mlx.core as mx
    except ImportError:
        return None
    # Fixed values (seeded), so every process times the same arithmetic.
    key = mx.random.key(0)
    w = mx.random.normal((WIDTH, WIDTH), key=key) / WIDTH ** 0.5
    x0 = mx.random.normal((1, WIDTH), key=mx.random.split(key)[1])
    mx.eval(w, x0)

    def probe() -> float:
        t0 = time.perf_counter()
        x = x0
        for _ in range(STEPS):
            x = mx.tanh(x @ w)
            mx.eval(x)
        return (time.perf_counter() - t0) * 1e3

    probe()   # the first call compiles and allocates; it is not a reading
    return probe


def dispatch_measurement_ms() -> float | None:
    """The probe's time in ms, or None where MLX cannot be imported."""
    if not _PROBE:
        _PROBE.append(_make())
    probe = _PROBE[0]
    return None if probe is None else round(probe(), 4)
