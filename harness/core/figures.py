"""The figures the harness tracks per arm, by id, and their nature: measured figures are judged
with statistics; exact ones are deterministic at temperature 0 (the same code and inputs give
the same value), so any change in them is a change, with no statistics."""

from __future__ import annotations

MEASURED, EXACT, EXACT_AT_TEMP0 = "measured", "exact", "exact at temperature 0"

FIGURES: dict[str, str] = {
    "ms_per_token": MEASURED,
    "ms_per_round": MEASURED,
    "phase_ms_per_round": MEASURED,
    "round_cost_classic_steps": MEASURED,
    "memory_mib": MEASURED,
    "identity_mismatches": EXACT,
    "rejection_rate": EXACT_AT_TEMP0,
    "counter_per_round": EXACT_AT_TEMP0,      # an engine's work counter (harness.core.counters)
}

# Figures divided by classic decode's ms/token of the same session: they move when classic's own
# time moves, the other way (a slower classic makes a round cost fewer classic steps).
PER_CLASSIC_STEP = frozenset({"round_cost_classic_steps"})


def is_exact(figure_id: str, temp: float) -> bool:
    kind = FIGURES.get(figure_id.split(":", 1)[0])
    return kind == EXACT or (kind == EXACT_AT_TEMP0 and temp == 0)
