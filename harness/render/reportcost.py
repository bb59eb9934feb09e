"""The cost-model section's words: the peak, why a part is left out, the round model's basis,
the roofline sentence. The figures are harness.analyze.costreport's (CostSection); this module
only formats them.
"""

from __future__ import annotations

from harness.analyze import costmodel as cm
from harness.analyze import costreport as cr
from harness.analyze import roofline as rl

ModelTables = cm.ModelTables


def reason(c: cr.CostSection) -> str:
    """Why the section is unavailable ("" when it is available)."""
    if c.unavailable == cr.NO_CLASSIC:
        return "no classic arm in this record: nothing to measure a step against"
    if c.unavailable == cr.NO_BYTES:
        return f"bytes per step unknown: {c.bytes_error}"
    return ""


def peak_note(c: cr.CostSection) -> str:
    if not c.available:
        return ""
    p = c.peak
    if p.host_spec is None:
        return "no host spec matches this host: unknown peak"
    if p.gb_s is None:
        return f"host spec {p.host_spec}: unknown peak ({p.source})"
    return f"host spec {p.host_spec}: {p.gb_s:g} GB/s ({p.source})"


def notes(c: cr.CostSection) -> list[str]:
    """Why there is no what-if table, in one note (none when there is one)."""
    if c.no_what_if == cr.NO_PROFILE:
        how = ", ".join(f"{v}=1" for v in c.profile_vars) or "no engine here declares a profile mode"
        inside = c.verify_phase or "the target's verify phase"
        return [f"no profile-mode arm ({how}) with an unprofiled twin: the drafter step "
                f"cost is not attributed (default mode leaves its device work inside {inside}), "
                "so there is no what-if table"]
    if c.no_what_if == cr.NO_ROLES:
        return [f"the engine of {c.profiled_arm} declares no {' and no '.join(c.missing_roles)} phase (`roles` "
                "in its declaration): the drafter step cost is not attributed, so there is no what-if table"]
    if c.no_what_if == cr.NO_STEP:
        return ["the profile-mode arm drafted nothing or its drafter directory is missing: no what-if"]
    if c.no_what_if == cr.NO_PHASES:
        return [f"a run of {c.profiled_arm} or its unprofiled twin did not report its engine's drafting or "
                "verify phase: no what-if"]
    return []


def model_note(c: cr.CostSection) -> str:
    """The round model's basis: the unprofiled round, its draft + verify split as profiled."""
    b, m = c.basis, c.model
    if b is None or m is None:
        return ""
    return (f"Model: the measured round of {b.arm} on {b.prompt} ({b.round_ms:.3f} ms, unprofiled) against "
            f"classic decode at {b.classic_ms:.3f} ms/token; its {b.draft_phase} + {b.verify_phase} "
            f"({b.draft_verify_ms:.3f} ms) split as {b.profiled_arm} splits them ({b.drafter_share:.1%} drafter): "
            f"{m.drafter_steps:.2f} drafter steps of {m.drafter_step_ms:.3f} ms, verify {m.verify_ms:.3f} ms, "
            f"other {m.other_ms:.3f} ms; {m.emitted_per_round:.3f} tokens per round held fixed")


def _ms(x: float) -> str:
    return f"{x:.3f} ms" if x >= 0.01 else f"{x:.2g} ms"


def roofline_sentence(r: cm.Roofline | None) -> str:
    """The roofline line under the bandwidth table: the bandwidth-bound time and the dispatch
    floor against the measured step, and what bounds it (harness.analyze.roofline's rule); ""
    when neither number is known (no peak, no floor)."""
    if r is None or (r.bandwidth_ms is None and r.floor is None):
        return ""
    step = _ms(r.step_ms)
    if r.bandwidth_ms is None:
        bw = "no bandwidth-bound time (this host's peak bandwidth is unknown)"
    else:
        bw = (f"bandwidth-bound time {_ms(r.bandwidth_ms)} (the target's {r.bytes_per_step:,} bytes at "
              f"{r.peak_gb_s:g} GB/s), {r.bandwidth_share:.1%} of the measured {step} step")
    fl = r.floor
    if fl is None:
        floor = "the dispatch floor was not measured in this record (it has no scaling.dispatch)"
    else:
        if fl.issue_ms is not None:
            parts = [f"the host building and issuing one T=1 step without waiting for it; one trivial evaluated "
                     f"op takes {_ms(fl.empty_ms)}"]
        else:
            parts = [f"{_ms(fl.empty_ms)} for one trivial evaluated op"]
            if fl.layers_ms is not None:
                parts.append(f"{fl.layers} layers x {_ms(fl.layer_ms or 0.0)} per evaluated decoder layer")
        probe = f"; the probe's own evaluated T=1 step {_ms(fl.step_ms)}" if fl.step_ms is not None else ""
        reps = f", medians of {fl.repeats}" if fl.repeats else ""
        floor = (f"dispatch floor {_ms(fl.floor_ms)} ({' + '.join(parts)}{reps}{probe}), "
                 f"{r.floor_share:.1%} of the measured step")
        if fl.floor_ms > r.step_ms:
            floor += (" (more than the step itself, so no floor: each layer evaluated alone pays its own sync; "
                      "this record predates the host issue time)" if fl.issue_ms is None else
                      " (more than the step itself, so no floor: the decode loop builds each step while the one "
                      "before runs, and the issue time measured alone is not what it pays)")
    verdict = {
        rl.BOUND_BANDWIDTH: "the step is bound by bandwidth (the bandwidth-bound time is at least half of it)",
        rl.BOUND_DISPATCH: "the step is bound by dispatch (launch and sync overhead), not bandwidth",
        rl.BOUND_NEITHER: f"the step is bound by neither: {r.unexplained or 0.0:.0%} unexplained "
                          "(by the larger of the two)",
        rl.BOUND_NOT_BANDWIDTH: "the step is not bound by bandwidth (the bandwidth-bound time is under half of it); "
                                "without a usable dispatch floor, what bounds it is not known",
        rl.BOUND_UNKNOWN: "what bounds the step is not known without a peak",
    }[r.bound]
    return f"Roofline of the target step: {bw}; {floor}: {verdict}."
