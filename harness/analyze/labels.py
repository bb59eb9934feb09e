"""Shipping / not-a-shipping-configuration labels.

A run is a shipping configuration only if no override was in force (arm env plus inherited
engine-prefixed env, as recorded in the run's "overrides") and the gate engaged on its own.
Anything else says "not a shipping configuration", names the override(s) and quotes the
probe's reading, so a number is never read as coming from what ships.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.core.schema import Gate, Run

SHIPPING = "shipping configuration"
NOT_SHIPPING = "not a shipping configuration"
# Gate outcomes meaning "the engine decided by itself and decoded what it would ship".
# not_applicable: classic decode, or an engine with no exactness gate (stock mlx-lm).
SELF_ENGAGED = ("passed", "not_applicable")


@dataclass(frozen=True)
class Label:
    shipping: bool
    text: str


def label_run(overrides: Mapping[str, str], gate: Gate, failed: bool = False) -> Label:
    """The label for one run, from its recorded overrides and the engine's gate block (a failed
    run's is empty: every field at its default)."""
    reasons: list[str] = []
    if overrides:
        names = ", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))
        reasons.append(f"override{'s' if len(overrides) > 1 else ''} in force: {names}")
    reported = gate != Gate()
    outcome = gate.outcome if reported else None
    if failed and not reported:
        reasons.append("the run failed before the gate reported")
    elif outcome not in SELF_ENGAGED:
        what = {"declined": "the gate declined (speculative decoding did not engage)",
                "overridden": "the gate was overridden"}.get(str(outcome), f"gate outcome {outcome or 'unknown'}")
        reasons.append(what)
    if not reasons:
        if outcome == "not_applicable" and gate.engaged:
            # Speculative decoding in an engine with no exactness gate: it ships as configured,
            # but nothing checked that its output matches classic decode.
            return Label(True, f"{SHIPPING} (this engine has no exactness gate; byte identity unchecked)")
        return Label(True, SHIPPING)
    reading = gate.reading
    text = f"{NOT_SHIPPING}: " + "; ".join(reasons)
    if reading:
        text += f'; probe reading: "{reading}"'
    return Label(False, text)


def reasons(label: str) -> str:
    """A label's reasons without its "not a shipping configuration: " (for a sentence that says
    it already); a label of several runs' labels joined by "; " loses each one's."""
    return label.replace(f"{NOT_SHIPPING}: ", "")


def annotate_label(run: Run) -> Run:
    """Fill a run's shipping and label fields (the runner's annotate hook uses this)."""
    lab = label_run(run.overrides, run.gate, run.status == "failed")
    run.shipping, run.label = lab.shipping, lab.text
    return run
