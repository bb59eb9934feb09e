"""What an arm needs in device memory, from the engine's memory report (docs/engine-contract.md).

A process that runs several arms holds every model it loaded (an override arm may load a pair
of its own), so its raw peak depends on which arms ran in it before. What an arm itself needs
is the weights its generation used plus what the generation added at its peak over what was
resident when it started (KV caches, activations). An engine that reports only its peak (a
command engine, one process per run, holds nothing else) is taken at that peak.
"""

from __future__ import annotations

from harness.core.schema import RunDiagnostics


def run_memory(diagnostics: RunDiagnostics) -> tuple[int, int | None] | None:
    """(bytes this run needed, bytes its generation added over the resident part), or None when
    the engine reported no memory."""
    peak = diagnostics.peak_memory_bytes
    if peak is None:
        return None
    resident, model = diagnostics.resident_memory_bytes, diagnostics.model_memory_bytes
    added = peak - resident if resident is not None else None
    if model is not None and added is not None:
        return model + added, added
    return peak, added
