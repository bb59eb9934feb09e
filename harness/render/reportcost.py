"""The cost-model section of a report: bytes per step, effective bandwidth, what-if, break-even.

Weights are counted from the model directories' safetensors headers (harness.analyze.costmodel);
step times come from the record. The peak is the matching host profile's figure, or
"unknown peak" when there is none: never a guess. The what-if needs the drafter step cost,
which only a profile-mode arm attributes (default mode leaves the drafter's device work in
verify_forward), so without one the section gives break-even figures only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.analyze import costmodel as cm
from harness.analyze import roofline as rl
from harness.analyze import rounds
from harness.analyze.comparisons import scaling_for
from harness.analyze.rounds import ProfileComparison, RoundSplit

EMBED = "model.embed_tokens."


ModelTables = cm.ModelTables


@dataclass
class Bytes:
    rows: list[tuple[str, int]]
    total: int
    note: str = ""


def target_bytes(tensors: cm.Tensors) -> Bytes:
    untied = any(n.startswith("lm_head.") for n in tensors)
    if untied and any(n.startswith(EMBED) for n in tensors):
        sb = cm.target_bytes_per_step(tensors, embedding_prefix=EMBED)
        return Bytes([("weights except the embedding table", sb.own_weights),
                      ("embedding row lookup", sb.embedding_row)], sb.total)
    sb = cm.target_bytes_per_step(tensors)
    note = "tied embeddings: the embedding table is also the LM head, read in full every step" \
        if any(n.startswith(EMBED) for n in tensors) else ""
    return Bytes([(f"target weights ({len(tensors)} tensors)", sb.total)], sb.total, note)


def _quantized_estimate(tensors: dict[str, tuple[int, list[int]]], q: dict[str, Any]) -> int | None:
    """Bytes after the engine's load-time quantization, when the record says which layers it took.

    Candidates are the 2-D non-embedding weights whose input width divides the group; the
    estimate is used only if their count equals the record's `linear_layers` (else None).
    """
    bits, group, count = q.get("bits"), q.get("group_size"), q.get("linear_layers")
    if not (isinstance(bits, int) and isinstance(group, int) and isinstance(count, int)):
        return None
    cands = {n: v for n, v in tensors.items() if n.endswith(".weight") and len(v[1]) == 2
             and not n.startswith(EMBED) and v[1][-1] % group == 0}
    if len(cands) != count:
        return None
    total = sum(b for n, (b, _) in tensors.items() if n not in cands)
    for b, shape in cands.values():
        numel = shape[0] * shape[1]
        elem = b // numel
        total += numel * bits // 8 + 2 * (numel // group) * elem   # packed weights + scales + biases
    return total


def drafter_bytes(tensors: cm.Tensors, quantization: dict[str, Any] | None) -> Bytes:
    disk = sum(b for b, _ in tensors.values())
    q = quantization or {}
    if q.get("quantized") and q.get("how") == "at load":
        est = _quantized_estimate(tensors, q)
        if est is not None:
            return Bytes([(f"drafter weights, {q['bits']}-bit group {q['group_size']} as quantized at load "
                           f"({q['linear_layers']} linear layers; {disk:,} B on disk)", est)], est,
                         "estimated from the checkpoint's tensor shapes and the record's quantization block")
        return Bytes([(f"drafter weights on disk ({len(tensors)} tensors)", disk)], disk,
                     "the engine quantized the drafter at load but its layers could not be matched: "
                     "on-disk bytes overstate what a step reads")
    return Bytes([(f"drafter weights ({len(tensors)} tensors)", disk)], disk)


@dataclass
class CostSection:
    available: bool
    reason: str = ""
    target_dir: str = ""
    drafter_dir: str = ""
    target: Bytes | None = None
    drafter: Bytes | None = None
    classic_arm: str = ""
    prompt: str = ""
    target_step_ms: float | None = None
    target_eff: cm.Efficiency | None = None
    drafter_step_ms: float | None = None
    drafter_eff: cm.Efficiency | None = None
    peak_note: str = ""
    model: cm.RoundModel | None = None
    model_arm: str = ""
    model_note: str = ""
    roofline: cm.Roofline | None = None    # what bounds the target step: bandwidth or dispatch
    what_if: list[cm.WhatIfRow] = field(default_factory=list)
    break_even: list[tuple[str, str, str, float, float, float, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# (arm, prompt) -> (classic arm, its median ms/token): the summary's classic reference, which
# prefers the same engine, so a reference-BLAS command arm is held against its own classic.
ClassicRef = dict[tuple[str, str], tuple[str, float]]


def build(record: dict[str, Any], classic_ref: ClassicRef, splits: list[RoundSplit],
          profiles: list[ProfileComparison], profile: dict[str, Any] | None,
          models: ModelTables) -> CostSection:
    """models: each pairing's target and drafter tensor tables, read by the caller: (directory,
    table) or (directory, why it could not be read); a role the pairing lacks is absent."""
    arms = {a["name"]: a for a in record["suite"]["arms"]}
    sec = CostSection(available=True)
    # Break-even for every engaged, unprofiled speculative arm that has a classic reference.
    for s in splits:
        ref = classic_ref.get((s.arm, s.prompt))
        if s.mode == "speculative" and not s.profile and ref:
            sec.break_even.append((s.arm, s.prompt, ref[0], s.per_unit_ms, s.emitted_per_verify or 0.0,
                                   cm.break_even_emitted(s.per_unit_ms, ref[1]),
                                   cm.round_cost_in_classic_steps(s.per_unit_ms, ref[1])))
    # The modelled arm: the first profile comparison with a classic reference, else any classic.
    prof = next((p for p in profiles if (p.unprofiled.arm, p.unprofiled.prompt) in classic_ref), None)
    key: tuple[str, str] | None
    if prof is not None:
        key = (prof.unprofiled.arm, prof.unprofiled.prompt)
    else:
        key = next((k for k in classic_ref if arms.get(k[0], {}).get("block", 1) > 1), None) \
            or next(iter(classic_ref), None)
    if key is None:
        return CostSection(False, "no classic arm in this record: nothing to measure a step against",
                           break_even=sec.break_even)
    sec.classic_arm, classic_ms = classic_ref[key]
    sec.prompt = key[1]
    tables = models.get(arms[key[0]]["pairing"], {})
    peak = (profile or {}).get("peak_bandwidth_gbs")
    if profile is None:
        sec.peak_note = "no host profile matches this host: unknown peak"
    elif peak is None:
        sec.peak_note = f"host profile {profile['name']}: unknown peak ({profile.get('peak_bandwidth_source', '')})"
    else:
        sec.peak_note = f"host profile {profile['name']}: {peak:g} GB/s ({profile.get('peak_bandwidth_source', '')})"
    tdir, ttab = tables.get("target", (None, "the pairing names no target"))
    try:
        if isinstance(ttab, str):
            raise ValueError(ttab)
        sec.target_dir = str(tdir)
        sec.target = target_bytes(ttab)
    except ValueError as e:
        return CostSection(False, f"bytes per step unknown: {e}", break_even=sec.break_even)
    sec.target_step_ms = classic_ms
    sec.target_eff = cm.bandwidth_efficiency(cm.effective_bandwidth(sec.target.total, classic_ms), peak)
    # The engine's dispatch floor, if it measured one for this pairing's target (scaling.dispatch).
    sc = scaling_for(record, arms[key[0]]["pairing"])
    sec.roofline = cm.roofline(sec.target.total, classic_ms, peak, cm.dispatch_floor(sc) if sc else None)
    ddir, dtab = tables.get("drafter", (None, None))
    if isinstance(dtab, dict):
        sec.drafter_dir = str(ddir)
        quant = _drafter_quantization(record, prof.profiled.arm) if prof is not None else None
        sec.drafter = drafter_bytes(dtab, quant)
        borrows = _result_arm(record, prof.profiled.arm).get("drafter_borrows") if prof is not None else None
        if borrows:
            sec.drafter = with_borrowed(sec.drafter, ttab, borrows)
    if prof is None:
        pvars = sorted({v for a in record["suite"]["arms"] if (v := rounds.profile_var(record, a["name"]))})
        how = ", ".join(f"{v}=1" for v in pvars) or "no engine here declares a profile mode"
        sec.notes.append(f"no profile-mode arm ({how}) with an unprofiled twin: the drafter step "
                         "cost is not attributed (default mode leaves its device work inside verify_forward), "
                         "so there is no what-if table")
        return sec
    step = prof.drafter_step_ms
    if step is None or sec.drafter is None:
        sec.notes.append("the profile-mode arm drafted nothing or its drafter directory is missing: no what-if")
        return sec
    sec.drafter_step_ms = step
    sec.drafter_eff = cm.bandwidth_efficiency(cm.effective_bandwidth(sec.drafter.total, step), peak)
    sec.model_arm = prof.unprofiled.arm
    sec.model, sec.model_note = _round_model(prof, classic_ms)
    at_target = cm.ms_at_bandwidth(sec.drafter.total, sec.target_eff.achieved_gb_s)
    scen = [cm.Scenario(f"drafter at the target's {sec.target_eff.achieved_gb_s:.1f} GB/s", at_target),
            cm.Scenario("half the step cost", step / 2)]
    sec.what_if = cm.what_if(sec.model, scen)
    return sec


def _result_arm(record: dict[str, Any], arm: str) -> dict[str, Any]:
    for r in record["runs"]:
        if r["arm"] == arm and r.get("status") == "ok":
            return r.get("result_arm") or {}
    return {}


def _drafter_quantization(record: dict[str, Any], arm: str) -> dict[str, Any] | None:
    return _result_arm(record, arm).get("drafter_quantization")


def with_borrowed(own: Bytes, target: cm.Tensors, borrows: dict[str, str]) -> Bytes:
    """A drafter that reads target tensors every step (an MTP head: the target's LM head in
    full, one embedding row): their bytes from the target's table, beside its own."""
    rows, total = list(own.rows), own.total
    head = borrows.get("lm_head")
    if head:
        names = sorted(n.rsplit(".", 1)[-1] for n in target if n.startswith(head))
        n = cm.lm_head_bytes(target, head)
        rows.append((f"borrowed target LM head (`{head}*`: {', '.join(names)})", n))
        total += n
    emb = borrows.get("embedding")
    if emb:
        n = cm.embedding_row_bytes(target, emb)
        rows.append((f"embedding row (`{emb}*`, one row per step)", n))
        total += n
    share = f"; borrowed tensors are {(total - own.total) / total:.0%} of a step's bytes" if total else ""
    return Bytes(rows, total, "; ".join(x for x in (own.note, f"reads the target's tensors it borrows{share}") if x))


def _round_model(p: ProfileComparison, classic_ms: float) -> tuple[cm.RoundModel, str]:
    """The unprofiled round, with its draft+verify time split in the profiled proportions.

    Default mode cannot say how much of verify_forward is drafter device work; profile mode can,
    but inflates both. So the measured unprofiled total of draft_block + verify_forward is
    divided as the profiled arm divides it, and the model closes on the measured round.
    """
    u, q = p.unprofiled, p.profiled
    du, vu = (u.component("draft_block"), u.component("verify_forward"))
    dq, vq = (q.component("draft_block"), q.component("verify_forward"))
    assert du and vu and dq and vq
    share = dq.per_unit_ms / (dq.per_unit_ms + vq.per_unit_ms)
    dv = du.per_unit_ms + vu.per_unit_ms
    steps = p.drafter_steps_per_round
    step = dv * share / steps
    verify = dv * (1 - share)
    other = u.per_unit_ms - dv
    model = cm.RoundModel(classic_ms_per_token=classic_ms, emitted_per_round=u.emitted_per_verify or 1.0,
                          verify_ms=verify, drafter_steps=steps, drafter_step_ms=step, other_ms=max(0.0, other))
    note = (f"Model: the measured round of {u.arm} on {u.prompt} ({u.per_unit_ms:.3f} ms, unprofiled) against "
            f"classic decode at {classic_ms:.3f} ms/token; its draft_block + verify_forward "
            f"({dv:.3f} ms) split as {q.arm} splits them ({share:.1%} drafter): {steps:.2f} drafter steps of "
            f"{step:.3f} ms, verify {verify:.3f} ms, other {max(0.0, other):.3f} ms; {u.emitted_per_verify:.3f} "
            f"tokens per round held fixed")
    return model, note


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
